// zero2.cpp — ZeRO stage 2: shard gradients too. Parameters stay whole (2 bytes per parameter
// with mixed precision, 4 in fp32); gradients (2/N) and the fp32 master and Adam's moments (12/N)
// persist only for the own shard. A unit's full gradient exists only from its backward until its
// reduce-scatter. Per step, for each of the k accumulated micro-batches:
//   1. forward         this rank's micro-batch, unit by unit
//   2. backward        unit by unit, last first; as soon as unit u's gradient is complete:
//      reduce_scatter  it (avg) into the own gradient shard (added to it after the first
//                      micro-batch), and release the full buffer
// then
//   3. update          the optimizer step on the own shard
//   4. all_gather      each unit's parameters, in place (with overlap_comm started here and
//                      waited for unit by unit as the next forward reaches each unit)
// Traffic: 2 Psi (N-1)/N per micro-batch and step, as DDP.
// With --shard-group node the gradients and the optimizer are sharded inside each node of G
// ranks and the nodes hold replicas (shard_groups.hpp): step 2 reduces in the world's two-level
// order, step 4 gathers inside the node, and N above is G.
#include "engines/engine.hpp"
#include "engines/micro_batch.hpp"
#include "engines/shard_groups.hpp"
#include "engines/sharding.hpp"

namespace zl {

namespace {

class Zero2Engine final : public Engine {
 public:
  Zero2Engine(Model& model, Device& device, Comm& world, const EngineOptions& options)
      : model_(model),
        device_(device),
        options_(options),
        features_(options.features),
        groups_(world, checked_shard_group(features_, world.size())),
        comm_(groups_.shards()),
        world_(world),
        layout_(layout_units(model.units(), comm_.size())),
        world_layout_(layout_units(model.units(), world.size())),
        params_(alloc_params(device, layout_, features_.precision, /*shard=*/false)),
        grad_shards_(
            alloc_units(device, layout_, MemCategory::Grads, /*shard=*/true, features_.precision)),
        opt_(alloc_optimizer(device, layout_, features_, /*shard=*/true)) {
    validate(features_);
    opt_.comm = &comm_;
    init_params(model_, layout_, params_, options_.seed, device_);
    master_from_params(opt_, own_params(), device_);
  }

  StepStats step(std::int64_t step) override {
    const std::int64_t micro_steps = features_.grad_accum_steps;
    Buffer loss_sum = step_loss_sum(device_);  // the losses, added on the device
    for (std::int64_t k = 0; k < micro_steps; ++k) {
      // 1. forward, 2. backward: each unit's full gradient lives only until it is reduced
      run_micro_batch(model_, options_.batch(step * micro_steps + k, world_.rank()), layout_,
                      features_.precision, grad_scale_of(opt_, features_), hooks(k == 0), options_,
                      device_, loss_sum.as<float>());
      wait_all(in_flight_);
    }
    // the logged loss, averaged over the ranks now that backward's reductions are done
    const float loss = mean_loss_over_ranks(world_, device_, loss_sum.as<float>(), micro_steps);
    const std::vector<TypedSpan> grads = owned_spans(grad_shards_, layout_, false, 0, 1);
    const double loss_scale = opt_.scaler.scale();  // what backward multiplied by
    const double lr = update_lr(opt_, options_);  // before the update moves the schedule
    const double grad_norm = sharded_grad_norm(
        comm_, device_, layout_, unscaled_partials(grads, loss_scale, device_));
    // 3. update the own shard only (unless the step is skipped: then no rank updates)
    const bool update = optimizer_step(grad_norm, step, own_params(), grads, opt_, options_,
                                       device_);
    if (update) notify(options_, device_, "update");
    // 4. all_gather: every rank's parameters are whole again
    gathers_ = all_gather_params(comm_, params_, layout_, options_, device_);
    return {.loss = loss,
            .grad_norm = grad_norm,
            .skipped = !update,
            .loss_scale = loss_scale,
            .lr = lr};
  }

  ModelState full_state() override {
    wait_all(gathers_);
    return gather_model_state(comm_, device_, layout_, opt_, own_params(), world_.rank() == 0);
  }

  // Checkpoints hold the world's shards, whatever the shard group (shard_groups.hpp).
  ShardState shard_state() override {
    wait_all(gathers_);
    return groups_.world_shard(owned_shard_state(opt_, own_params(), device_), layout_,
                               world_layout_);
  }

  void load_shard_state(const ShardState& state) override {
    load_owned_shard_state(opt_, own_params(), groups_.group_shard(state, layout_, world_layout_),
                           device_);
    wait_all(gathers_);
    all_gather_params(comm_, params_, layout_, {}, device_);
  }

 private:
  std::vector<TypedSpan> own_params() {
    return owned_spans(params_, layout_, /*shard_of_full=*/true, comm_.rank(), comm_.size());
  }

  MicroBatchHooks hooks(bool first_micro_batch) {
    MicroBatchHooks hooks;
    hooks.params = [this](int u, bool) {
      if (static_cast<std::size_t>(u) < gathers_.size()) gathers_[u].wait();
      return UnitParams{view_of(params_[u]), {}};
    };
    hooks.grad_ready = [this, first_micro_batch](int u, TypedSpan grad) {
      in_flight_.push_back(
          groups_.reduce_into_own_shard(device_, grad, view_of(grad_shards_[u]), first_micro_batch,
                                        features_.reduce_bucket_elems, features_.overlap_comm));
      bound_in_flight(in_flight_, 2);
      notify(options_, device_, "reduce_scatter", u);
    };
    return hooks;
  }

  Model& model_;
  Device& device_;
  EngineOptions options_;
  TrainingFeatures features_;
  ShardGroups groups_;  // the world, or its nodes and the replica groups (--shard-group node)
  Comm& comm_;          // the ranks that shard: the world, or this rank's node
  Comm& world_;         // every rank: the micro-batches and the logged loss
  std::vector<UnitLayout> layout_;        // laid out for comm_'s ranks
  std::vector<UnitLayout> world_layout_;  // laid out for the world's: the checkpoints'
  UnitBuffers params_;       // full, training dtype
  UnitBuffers grad_shards_;  // own shard of the averaged (accumulated) gradients
  OptimizerState opt_;       // own shard
  std::vector<InFlight> in_flight_;  // overlap_comm: reduce_scatters started during backward
  std::vector<InFlight> gathers_;    // last step's parameter all_gathers, one per unit
};

}  // namespace

std::unique_ptr<Engine> make_zero2_engine(Model& model, Device& device, Comm& comm,
                                          const EngineOptions& options) {
  return std::make_unique<Zero2Engine>(model, device, comm, options);
}

}  // namespace zl
