// hsdp.cpp — hybrid sharding (PyTorch FSDP's HYBRID_SHARD, HSDP): ZeRO-3 inside a node, DDP
// across the nodes. The world splits twice: each node's G ranks form a shard group that shards
// the parameters, gradients and optimizer states as ZeRO-3 does among G ranks; the N nodes hold
// the same shards, and rank i of every node forms a replica group with the others' rank i.
// ZeRO-3's gathers and reduce-scatters stay inside the node; only an all_reduce of each rank's
// Psi/G gradient shard (in fp32) crosses between nodes. Per step, for each of the k accumulated
// micro-batches:
//   1. forward    for each unit: all_gather its parameters inside the node, run it, release them
//   2. backward   for each unit, last first: gather inside the node again, run its backward into
//                 a full gradient, then reduce it to the world's average of the own shard
//                 (shard_groups.hpp; added to the own gradient shard after the first
//                 micro-batch):
//                   a. reduce_scatter (sum) inside the node: the node's sum of the own shard,
//                      in the training dtype (as a node's sum crosses between nodes)
//                   b. all_reduce (sum) of that shard across the nodes, in fp32
//                   c. one division by W, rounded once to the training dtype
//                 which is the world's two-level order (comm/reduce.hpp): the reference's bits
// then
//   3. update     the optimizer step on the own shard; every node updates the same shard alike
// With one node (G = W) it is ZeRO-3 itself. Its checkpoints are ZeRO-3's: each rank saves its
// shard of the world's partition, cut from the unit gathered inside its node, and a resume cuts
// its node shard from the unit gathered over the world.
#include <memory>

#include "engines/engine.hpp"
#include "engines/micro_batch.hpp"
#include "engines/shard_groups.hpp"
#include "engines/sharding.hpp"
#include "engines/zero3_shards.hpp"

namespace zl {

namespace {

class HsdpEngine final : public Engine {
 public:
  HsdpEngine(Model& model, Device& device, Comm& world, const EngineOptions& options)
      : model_(model),
        device_(device),
        world_(world),
        options_(options),
        features_(options.features),
        groups_(world, checked_shard_group(features_, world.size())),
        node_(groups_.shards()),
        layout_(layout_units(model.units(), node_.size())),
        world_layout_(layout_units(model.units(), world.size())),
        grad_shards_(
            alloc_units(device, layout_, MemCategory::Grads, /*shard=*/true, features_.precision)),
        opt_(alloc_optimizer(device, layout_, features_, /*shard=*/true)),
        shards_(model, device, node_, layout_, features_, options.seed, opt_) {
    validate(features_);
    opt_.comm = &node_;
    master_from_params(opt_, shards_.own(), device_);
  }

  StepStats step(std::int64_t step) override {
    const std::int64_t micro_steps = features_.grad_accum_steps;
    Buffer loss_sum = step_loss_sum(device_);  // the losses, added on the device
    for (std::int64_t k = 0; k < micro_steps; ++k) {
      // 1. forward and 2. backward; each rank of the world trains on its own micro-batch
      run_micro_batch(model_, options_.batch(step * micro_steps + k, world_.rank()), layout_,
                      features_.precision, grad_scale_of(opt_, features_), hooks(k == 0), options_,
                      device_, loss_sum.as<float>());
    }
    const float loss = mean_loss_over_ranks(world_, device_, loss_sum.as<float>(), micro_steps);
    const std::vector<TypedSpan> grads = owned_spans(grad_shards_, layout_, false, 0, 1);
    const double loss_scale = opt_.scaler.scale();  // what backward multiplied by
    const double lr = update_lr(opt_, options_);    // before the update moves the schedule
    // Every node holds the same averaged gradient: its shards give the world's norm.
    const double grad_norm =
        sharded_grad_norm(node_, device_, layout_, unscaled_partials(grads, loss_scale, device_));
    // 3. update the own shard (unless the step is skipped)
    const bool update =
        optimizer_step(grad_norm, step, shards_.own(), grads, opt_, options_, device_);
    if (update) notify(options_, device_, "update");
    return {.loss = loss,
            .grad_norm = grad_norm,
            .skipped = !update,
            .loss_scale = loss_scale,
            .lr = lr};
  }

  ModelState full_state() override {
    return gather_model_state(node_, device_, layout_, opt_, shards_.own(), world_.rank() == 0);
  }

  // ZeRO-3's checkpoint shard of this rank, which its node's ranks hold between them.
  ShardState shard_state() override {
    return groups_.world_shard(owned_shard_state(opt_, shards_.own(), device_), layout_,
                               world_layout_);
  }

  // This rank's node shard, from the world's checkpoint shards.
  void load_shard_state(const ShardState& state) override {
    load_owned_shard_state(opt_, shards_.own(), groups_.group_shard(state, layout_, world_layout_),
                           device_);
  }

 private:
  MicroBatchHooks hooks(bool first_micro_batch) {
    MicroBatchHooks hooks;
    hooks.params = [this](int u, bool) {
      Buffer staged;
      UnitParams params;
      params.owned = gather_unit(node_, device_, layout_[u], shards_.on_device(u, staged),
                                 features_.allgather_bucket_elems);
      params.view = view_of(params.owned);
      notify(options_, device_, "gather", u);
      return params;
    };
    hooks.grad_ready = [this, first_micro_batch](int u, TypedSpan grad) {
      groups_.reduce_into_own_shard(device_, grad, view_of(grad_shards_[u]), first_micro_batch,
                                    features_.reduce_bucket_elems, /*async=*/false);
      notify(options_, device_, "reduce_scatter", u);
    };
    return hooks;
  }

  Model& model_;
  Device& device_;
  Comm& world_;
  EngineOptions options_;
  TrainingFeatures features_;
  ShardGroups groups_;              // the nodes (the shard groups) and the replica groups
  Comm& node_;                      // this rank's node: the shard group, of G ranks
  std::vector<UnitLayout> layout_;  // laid out for G ranks
  std::vector<UnitLayout> world_layout_;  // laid out for W ranks: ZeRO-3's, the checkpoints'
  UnitBuffers grad_shards_;         // own shard of the averaged (accumulated) gradients
  OptimizerState opt_;              // own shard
  Zero3Shards shards_;              // own parameter shards, training dtype
};

}  // namespace

std::unique_ptr<Engine> make_hsdp_engine(Model& model, Device& device, Comm& comm,
                                         const EngineOptions& options) {
  return std::make_unique<HsdpEngine>(model, device, comm, options);
}

}  // namespace zl
