// ddp.cpp — data parallelism without sharding: every rank holds the whole model, its gradients
// and its optimizer state (16 bytes per parameter: fp32 Adam, or 2 + 2 + 12 with mixed
// precision). Per step, for each of the k accumulated micro-batches:
//   1. forward     this rank's micro-batch, unit by unit
//   2. backward    unit by unit, gradients into full per-unit buffers (training dtype)
//   3. all_reduce  (avg) each unit's gradients: every rank now holds the mean; with k > 1 the
//                  first micro-batch's gradients are the full accumulator, and each later
//                  mean is added into it. With overlap_comm each unit's all_reduce starts as
//                  soon as its gradient is complete, while backward goes on
// then
//   4. update      one optimizer step over the whole model, identically on every rank
#include "engines/engine.hpp"
#include "engines/micro_batch.hpp"
#include "engines/optimizer_swap.hpp"
#include "engines/sharding.hpp"
#include "optim/grad_norm.hpp"

namespace zl {

namespace {

class DdpEngine final : public Engine {
 public:
  DdpEngine(Model& model, Device& device, Comm& comm, const EngineOptions& options)
      : model_(model),
        device_(device),
        comm_(comm),
        options_(options),
        features_(options.features),
        layout_(layout_units(model.units(), comm.size())),
        params_(alloc_params(device, layout_, features_.precision, /*shard=*/false)),
        grads_(alloc_units(device, layout_, MemCategory::Grads, false, features_.precision)),
        opt_(alloc_optimizer(device, layout_, features_, /*shard=*/false)) {
    validate(features_);
    opt_.comm = &comm;
    if (features_.grad_accum_steps > 1) {
      accum_ = alloc_units(device, layout_, MemCategory::Grads, false, features_.precision);
    }
    init_params(model_, layout_, params_, options_.seed, device_);
    master_from_params(opt_, whole(params_), device_);
  }

  StepStats step(std::int64_t step) override {
    const std::int64_t micro_steps = features_.grad_accum_steps;
    Buffer loss_sum = step_loss_sum(device_);  // the losses, added on the device
    for (std::int64_t k = 0; k < micro_steps; ++k) {
      // 1. forward and 2. backward this rank's micro-batch into full per-unit gradients (the
      //    first of several straight into the accumulator)
      UnitBuffers& grads = micro_steps > 1 && k == 0 ? accum_ : grads_;
      run_micro_batch(model_, options_.batch(step * micro_steps + k, comm_.rank()), layout_,
                      features_.precision, grad_scale_of(opt_, features_), hooks(grads), options_,
                      device_, loss_sum.as<float>());
      // 3. all_reduce: every rank gets the mean gradient (added into the accumulator); with
      //    overlap_comm each unit's all_reduce already started in backward, as it was ready
      if (features_.overlap_comm) {
        wait_all(in_flight_);
      } else {
        reduce_grads(grads);
      }
      if (micro_steps > 1 && k > 0) accumulate();
    }
    // the logged loss, averaged over the ranks now that backward's reductions are done
    const float loss = mean_loss_over_ranks(comm_, device_, loss_sum.as<float>(), micro_steps);
    // 4. update the whole model, identically everywhere
    const std::vector<TypedSpan> grads = whole(micro_steps > 1 ? accum_ : grads_);
    const double loss_scale = opt_.scaler.scale();  // what backward multiplied by
    const double lr = update_lr(opt_, options_);  // before the update moves the schedule
    const double grad_norm =
        norm_from_partials(unscaled_partials(grads, loss_scale, device_));
    const bool update =
        optimizer_step(grad_norm, step, whole(params_), grads, opt_, options_, device_);
    if (update) notify(options_, device_, "update");
    return {.loss = loss,
            .grad_norm = grad_norm,
            .skipped = !update,
            .loss_scale = loss_scale,
            .lr = lr};
  }

  ModelState full_state() override {
    return whole_model_state(device_, layout_, opt_, whole(params_), comm_.rank() == 0);
  }

  ShardState shard_state() override {
    const int rank = comm_.rank(), world = comm_.size();
    return with_state_resident(opt_, device_, [&] {
      ShardState state = owned_shard_state(opt_, whole(params_), device_);
      state.params = own_slices(fp32_params(opt_, whole(params_)));
      state.exp_avg = copy_shards(device_, own_shards(opt_.adam.exp_avg, layout_, rank, world));
      state.exp_avg_sq =
          copy_shards(device_, own_shards(opt_.adam.exp_avg_sq, layout_, rank, world));
      return state;
    });
  }

  void load_shard_state(const ShardState& state) override {
    with_state_resident(opt_, device_, [&] {
      load_full_from_shards(comm_, device_, opt_.master.empty() ? params_ : opt_.master, layout_,
                            state.params);
      params_from_master(opt_, whole(params_), device_);
      load_full_from_shards(comm_, device_, opt_.adam.exp_avg, layout_, state.exp_avg);
      load_full_from_shards(comm_, device_, opt_.adam.exp_avg_sq, layout_, state.exp_avg_sq);
    });
    opt_.adam.updates = state.adam_updates;
    if (state.scaler && opt_.scaler.skips_overflows()) opt_.scaler.load(*state.scaler);
  }

 private:
  std::vector<TypedSpan> whole(UnitBuffers& buffers) {
    return owned_spans(buffers, layout_, /*shard_of_full=*/false, 0, 1);
  }

  // The micro-batch's hooks, its gradients left in `grads` (grads_ or accum_).
  MicroBatchHooks hooks(UnitBuffers& grads) {
    MicroBatchHooks hooks;
    hooks.params = [this](int u, bool) { return UnitParams{view_of(params_[u]), {}}; };
    hooks.grad_buffer = [&grads](int u) { return view_of(grads[u]); };
    hooks.grad_ready = [this](int u, TypedSpan grad) {
      if (!features_.overlap_comm) return;
      in_flight_.push_back(start_all_reduce(comm_, grad, features_.reduce_bucket_elems, true));
      notify(options_, device_, "all_reduce", u);
    };
    return hooks;
  }

  void reduce_grads(UnitBuffers& grads) {
    for (std::size_t u = 0; u < layout_.size(); ++u) {
      all_reduce_unit(comm_, view_of(grads[u]), features_.reduce_bucket_elems);
      notify(options_, device_, "all_reduce", static_cast<int>(u));
    }
  }

  // A later micro-batch's mean gradient added into the accumulator.
  void accumulate() {
    for (std::size_t u = 0; u < layout_.size(); ++u) {
      add_into(device_, view_of(accum_[u]), view_of(grads_[u]));
    }
  }

  std::vector<std::vector<float>> own_slices(const UnitSpans& spans) const {
    UnitSpans slices;
    for (std::size_t u = 0; u < layout_.size(); ++u) {
      const ShardRange shard = shard_of(layout_[u], comm_.rank(), comm_.size());
      slices.push_back(spans[u].subspan(static_cast<std::size_t>(shard.begin),
                                        static_cast<std::size_t>(shard.size())));
    }
    return copy_shards(device_, slices);
  }

  Model& model_;
  Device& device_;
  Comm& comm_;
  EngineOptions options_;
  TrainingFeatures features_;
  std::vector<UnitLayout> layout_;
  UnitBuffers params_;  // training dtype
  UnitBuffers grads_;   // this micro-batch's gradients, averaged in place
  UnitBuffers accum_;   // with gradient accumulation: the sum of the averages
  OptimizerState opt_;  // whole model
  std::vector<InFlight> in_flight_;  // overlap_comm: all_reduces started during backward
};

}  // namespace

std::unique_ptr<Engine> make_ddp_engine(Model& model, Device& device, Comm& comm,
                                        const EngineOptions& options) {
  return std::make_unique<DdpEngine>(model, device, comm, options);
}

}  // namespace zl
