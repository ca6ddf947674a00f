// zero3.cpp — ZeRO stage 3: shard the parameters too. Each rank keeps only its shard of the
// parameters (2/N with mixed precision, 4/N in fp32), gradients (2/N or 4/N), and the fp32 master
// and Adam's moments (12/N or 8/N); a unit's full parameters exist only while that unit computes.
// Per step, for each of the k accumulated micro-batches:
//   1. forward    for each unit: all_gather its parameters, run it, release them
//   2. backward   for each unit, last first: all_gather its parameters again, run its backward
//                 into a full gradient buffer, reduce_scatter that (avg) into the own gradient
//                 shard (added to it after the first micro-batch), release both
// then
//   3. update     the optimizer step on the own shard; no all-gather afterwards: the next step
//                 gathers what it needs
// Traffic: two all-gathers and one reduce-scatter, 3 Psi (N-1)/N: 1.5x DDP.
// Two DeepSpeed options change when parameters move, never the results:
//   stage3_param_persistence_threshold  units smaller than this stay whole on every rank: never
//                                       gathered, all-gathered once after the update (as ZeRO-2)
//   stage3_prefetch_bucket_size         the units of the next visits, up to this many elements,
//                                       are gathered right after the current one, ahead of use
//                                       (with overlap_comm asynchronously, while it computes)
// With offload_param (ZeRO-Infinity's CPU half) the own shards live in host memory: each gather
// first copies the unit's shard to the device, and each update sends it back; with its nvme_path
// they live on disk, read into host memory for each gather and the update (zero3_shards.hpp).
// With --shard-group node this is hybrid sharding (PyTorch FSDP's HYBRID_SHARD, HSDP): the
// parameters, gradients and optimizer states are sharded as above among the G ranks of each node
// and the nodes hold replicas (shard_groups.hpp). Steps 1 and 2 gather inside the node, step 2
// reduces in the world's two-level order (a reduce_scatter inside the node, an fp32 all_reduce of
// the own shard across the nodes), N above is G, and checkpoints still hold the world's shards.
#include "engines/engine.hpp"
#include "engines/micro_batch.hpp"
#include "engines/shard_groups.hpp"
#include "engines/sharding.hpp"
#include "engines/visit_gathers.hpp"
#include "engines/zero3_shards.hpp"

namespace zl {

namespace {

class Zero3Engine final : public Engine {
 public:
  Zero3Engine(Model& model, Device& device, Comm& world, const EngineOptions& options)
      : model_(model),
        device_(device),
        options_(options),
        features_(options.features),
        groups_(world, checked_shard_group(features_, world.size())),
        comm_(groups_.shards()),
        world_(world),
        layout_(layout_units(model.units(), comm_.size())),
        world_layout_(layout_units(model.units(), world.size())),
        grad_shards_(
            alloc_units(device, layout_, MemCategory::Grads, /*shard=*/true, features_.precision)),
        opt_(alloc_optimizer(device, layout_, features_, /*shard=*/true)),
        shards_(model, device, comm_, layout_, features_, options.seed, opt_),
        gathers_(
            model.forward_order(), layout_, shards_.persistent_units(),
            features_.prefetch_bucket_elems, /*within_pass=*/false,
            [this](int unit, bool, bool ahead) { return start_gather(unit, ahead); },
            read_ahead_of(shards_)) {
    validate(features_);
    opt_.comm = &comm_;
    master_from_params(opt_, shards_.own(), device_);
  }

  StepStats step(std::int64_t step) override {
    const std::int64_t micro_steps = features_.grad_accum_steps;
    Buffer loss_sum = step_loss_sum(device_);  // the losses, added on the device
    for (std::int64_t k = 0; k < micro_steps; ++k) {
      // 1. forward and 2. backward, gathering each unit for each visit
      gathers_.begin_micro_batch();
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
    // 3. update the own shard (unless the step is skipped); persistent units are made whole
    const bool update =
        optimizer_step(grad_norm, step, shards_.own(), grads, opt_, options_, device_);
    if (update) notify(options_, device_, "update");
    gather_persistent(options_);
    return {.loss = loss,
            .grad_norm = grad_norm,
            .skipped = !update,
            .loss_scale = loss_scale,
            .lr = lr};
  }

  ModelState full_state() override {
    return gather_model_state(comm_, device_, layout_, opt_, shards_.own(), world_.rank() == 0);
  }

  // Checkpoints hold the world's shards, whatever the shard group (shard_groups.hpp).
  ShardState shard_state() override {
    return groups_.world_shard(owned_shard_state(opt_, shards_.own(), device_), layout_,
                               world_layout_);
  }

  void load_shard_state(const ShardState& state) override {
    load_owned_shard_state(opt_, shards_.own(), groups_.group_shard(state, layout_, world_layout_),
                           device_);
    gather_persistent({});
  }

 private:
  MicroBatchHooks hooks(bool first_micro_batch) {
    MicroBatchHooks hooks;
    hooks.params = [this](int u, bool) { return params_for_visit(u); };
    hooks.grad_ready = [this, first_micro_batch](int u, TypedSpan grad) {
      in_flight_.push_back(
          groups_.reduce_into_own_shard(device_, grad, view_of(grad_shards_[u]), first_micro_batch,
                                        features_.reduce_bucket_elems, features_.overlap_comm));
      bound_in_flight(in_flight_, 2);
      notify(options_, device_, "reduce_scatter", u);
    };
    return hooks;
  }

  // The parameters of the next visit (unit u): whole if persistent, else gathered (or prefetched).
  UnitParams params_for_visit(int u) {
    if (!shards_.persistent(u)) return gathers_.next(u);
    gathers_.skip();
    return {shards_.whole(u), {}};
  }

  // One visit's gather from the shard group: async with overlap_comm when it runs ahead of its
  // visit, so it runs while the visit before it computes.
  VisitGather start_gather(int unit, bool ahead) {
    VisitGather gather{device_.alloc_unset(MemCategory::Gathered, features_.precision,
                                           {layout_[unit].padded_elems}),
                       {},
                       {}};
    const TypedSpan shard = shards_.on_device(unit, gather.staged);
    gather.flight =
        start_all_gather(comm_, device_, shard, view_of(gather.params),
                         features_.allgather_bucket_elems, ahead && features_.overlap_comm);
    notify(options_, device_, "gather", unit);
    return gather;
  }

  void gather_persistent(const EngineOptions& options) {
    shards_.gather_persistent(features_.allgather_bucket_elems,
                              [&](int u) { notify(options, device_, "all_gather", u); });
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
  UnitBuffers grad_shards_;       // own shard of the averaged (accumulated) gradients
  OptimizerState opt_;            // own shard
  Zero3Shards shards_;            // own parameter shards, training dtype, wherever they live
  std::vector<InFlight> in_flight_;  // overlap_comm: reduce_scatters started during backward
  VisitGathers gathers_;             // each visit's gather, or its prefetch
};

}  // namespace

std::unique_ptr<Engine> make_zero3_engine(Model& model, Device& device, Comm& comm,
                                          const EngineOptions& options) {
  return std::make_unique<Zero3Engine>(model, device, comm, options);
}

}  // namespace zl
