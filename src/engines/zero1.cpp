// zero1.cpp — ZeRO stage 1: shard the optimizer state. Parameters and gradients stay whole on
// every rank (2 + 2 bytes per parameter with mixed precision, 4 + 4 in fp32); the fp32 master and
// Adam's moments exist only for the own shard (12/N, or 8/N). Per step, for each of the k
// accumulated micro-batches:
//   1. forward         this rank's micro-batch, unit by unit
//   2. backward        unit by unit, into full per-unit gradient buffers
//   3. reduce_scatter  each unit's gradients (avg), in place: the own slice now holds the mean;
//                      with k > 1 the first micro-batch's goes straight into an own-shard
//                      accumulator and each later one's is added into it
// then
//   4. update          the optimizer step on the own shard only
//   5. all_gather      each unit's parameters, in place: every rank is whole again (with
//                      overlap_comm started here and waited for unit by unit as the next
//                      forward reaches each unit)
// Traffic: reduce-scatter plus all-gather is the same 2 Psi (N-1)/N as DDP's all-reduce.
// With --shard-group node the optimizer is sharded inside each node of G ranks and the nodes hold
// replicas (shard_groups.hpp): step 3 reduces in the world's two-level order, step 5 gathers
// inside the node, and N above is G.
#include "engines/engine.hpp"
#include "engines/micro_batch.hpp"
#include "engines/shard_groups.hpp"
#include "engines/sharding.hpp"

namespace zl {

namespace {

class Zero1Engine final : public Engine {
 public:
  Zero1Engine(Model& model, Device& device, Comm& world, const EngineOptions& options)
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
        grads_(alloc_units(device, layout_, MemCategory::Grads, false, features_.precision)),
        opt_(alloc_optimizer(device, layout_, features_, /*shard=*/true)) {
    validate(features_);
    opt_.comm = &comm_;
    if (features_.grad_accum_steps > 1) {
      accum_ = alloc_units(device, layout_, MemCategory::Grads, /*shard=*/true,
                           features_.precision);
    }
    init_params(model_, layout_, params_, options_.seed, device_);
    master_from_params(opt_, own(params_), device_);
  }

  StepStats step(std::int64_t step) override {
    const std::int64_t micro_steps = features_.grad_accum_steps;
    Buffer loss_sum = step_loss_sum(device_);  // the losses, added on the device
    for (std::int64_t k = 0; k < micro_steps; ++k) {
      // 1. forward and 2. backward this rank's micro-batch into full per-unit gradients
      // 3. reduce_scatter: the own slice of each unit's gradient becomes the mean, in place (the
      //    first of several micro-batches' straight into the accumulator); with overlap_comm
      //    these start in backward, unit by unit as each is ready
      const std::vector<TypedSpan> grad_shards =
          micro_steps > 1 && k == 0 ? owned_spans(accum_, layout_, false, 0, 1) : own(grads_);
      run_micro_batch(model_, options_.batch(step * micro_steps + k, world_.rank()), layout_,
                      features_.precision, grad_scale_of(opt_, features_), hooks(grad_shards),
                      options_, device_, loss_sum.as<float>());
      wait_all(in_flight_);
      for (std::size_t u = 0; u < layout_.size(); ++u) {
        if (!features_.overlap_comm) {
          groups_.reduce_into_own_shard(device_, view_of(grads_[u]), grad_shards[u],
                                        /*first_micro_batch=*/true, features_.reduce_bucket_elems,
                                        /*async=*/false);
          notify(options_, device_, "reduce_scatter", static_cast<int>(u));
        }
        if (micro_steps > 1 && k > 0) add_into(device_, view_of(accum_[u]), grad_shards[u]);
      }
    }
    // the logged loss, averaged over the ranks now that backward's reductions are done
    const float loss = mean_loss_over_ranks(world_, device_, loss_sum.as<float>(), micro_steps);
    const std::vector<TypedSpan> grads =
        micro_steps > 1 ? owned_spans(accum_, layout_, false, 0, 1) : own(grads_);
    const double loss_scale = opt_.scaler.scale();  // what backward multiplied by
    const double lr = update_lr(opt_, options_);  // before the update moves the schedule
    const double grad_norm = sharded_grad_norm(
        comm_, device_, layout_, unscaled_partials(grads, loss_scale, device_));
    // 4. update the own shard only (unless the step is skipped: then no rank updates)
    const bool update =
        optimizer_step(grad_norm, step, own(params_), grads, opt_, options_, device_);
    if (update) notify(options_, device_, "update");
    // 5. all_gather: every rank's parameters are whole again
    gathers_ = all_gather_params(comm_, params_, layout_, options_, device_);
    return {.loss = loss,
            .grad_norm = grad_norm,
            .skipped = !update,
            .loss_scale = loss_scale,
            .lr = lr};
  }

  ModelState full_state() override {
    wait_all(gathers_);
    return gather_model_state(comm_, device_, layout_, opt_, own(params_), world_.rank() == 0);
  }

  // Checkpoints hold the world's shards, whatever the shard group (shard_groups.hpp).
  ShardState shard_state() override {
    wait_all(gathers_);
    return groups_.world_shard(owned_shard_state(opt_, own(params_), device_), layout_,
                               world_layout_);
  }

  void load_shard_state(const ShardState& state) override {
    load_owned_shard_state(opt_, own(params_), groups_.group_shard(state, layout_, world_layout_),
                           device_);
    wait_all(gathers_);
    all_gather_params(comm_, params_, layout_, {}, device_);
  }

 private:
  std::vector<TypedSpan> own(UnitBuffers& full) {
    return owned_spans(full, layout_, /*shard_of_full=*/true, comm_.rank(), comm_.size());
  }

  // The micro-batch's hooks, each unit's mean gradient shard reduced into `grad_shards`.
  MicroBatchHooks hooks(const std::vector<TypedSpan>& grad_shards) {
    MicroBatchHooks hooks;
    hooks.params = [this](int u, bool) {
      if (static_cast<std::size_t>(u) < gathers_.size()) gathers_[u].wait();
      return UnitParams{view_of(params_[u]), {}};
    };
    hooks.grad_buffer = [this](int u) { return view_of(grads_[u]); };
    hooks.grad_ready = [this, &grad_shards](int u, TypedSpan) {
      if (!features_.overlap_comm) return;
      // grads_ stays until the next micro-batch's backward, after the wait
      in_flight_.push_back(groups_.reduce_into_own_shard(
          device_, view_of(grads_[u]), grad_shards[u], /*first_micro_batch=*/true,
          features_.reduce_bucket_elems, /*async=*/true, /*grad_kept=*/true));
      notify(options_, device_, "reduce_scatter", u);
    };
    return hooks;
  }

  Model& model_;
  Device& device_;
  EngineOptions options_;
  TrainingFeatures features_;
  ShardGroups groups_;  // the world, or its nodes and the replica groups (--shard-group node)
  Comm& comm_;          // the ranks that shard the optimizer: the world, or this rank's node
  Comm& world_;         // every rank: the micro-batches and the logged loss
  std::vector<UnitLayout> layout_;        // laid out for comm_'s ranks
  std::vector<UnitLayout> world_layout_;  // laid out for the world's: the checkpoints'
  UnitBuffers params_;  // full, training dtype
  UnitBuffers grads_;   // full; after step 3 only the own slice holds the average
  UnitBuffers accum_;   // with gradient accumulation: own shard of the sum of the averages
  OptimizerState opt_;  // own shard
  std::vector<InFlight> in_flight_;  // overlap_comm: reduce_scatters started during backward
  std::vector<InFlight> gathers_;    // last step's parameter all_gathers, one per unit
};

}  // namespace

std::unique_ptr<Engine> make_zero1_engine(Model& model, Device& device, Comm& comm,
                                          const EngineOptions& options) {
  return std::make_unique<Zero1Engine>(model, device, comm, options);
}

}  // namespace zl
