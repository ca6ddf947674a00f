// ddp.cpp — exercise 1: data parallelism. Every rank holds the whole model, its
// gradients and its optimizer state. Per step, for each of the k accumulated micro-batches:
//   1. forward and backward this rank's micro-batch into full per-unit gradients
//   2. all_reduce (avg) each unit's gradients: every rank now holds the mean       (TODO 1)
//   3. with k > 1, keep the sum of the means in an accumulator                    (TODO 2)
// then
//   4. the norm and one AdamW update of the whole model, identically on every rank
#include "exercise.hpp"

namespace zl::exercise {

namespace {

class DdpExercise final : public Engine {
 public:
  DdpExercise(Model& model, Device& device, Comm& comm, const EngineOptions& options)
      : model_(model),
        device_(device),
        comm_(comm),
        options_(options),
        features_(options.features),
        layout_(layout_units(model.units(), comm.size())),
        params_(alloc_params(device, layout_, features_.precision, /*shard=*/false)),
        grads_(alloc_units(device, layout_, MemCategory::Grads, false, features_.precision)),
        opt_(alloc_optimizer(device, layout_, features_, /*shard=*/false)) {
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
      // 1. forward and backward into grads_
      zero_units(device_, grads_);
      const Batch batch = options_.batch(step * micro_steps + k, comm_.rank());
      run_micro_batch(model_, batch, layout_, features_.precision, grad_scale_of(opt_, features_),
                      hooks(), options_, device_, loss_sum.as<float>());
      for (std::size_t u = 0; u < layout_.size(); ++u) {
        // 2. TODO 1: every rank's gradient of unit u becomes the average over the ranks
        todo("ddp.cpp", 1,
             "every rank's gradient of unit u must become the average over all ranks, the same on "
             "every rank",
             "all_reduce (avg) unit u's gradient grads_[u] in place: its padded_elems elements "
             "of features_.precision (comm/comm.hpp)");
        notify(options_, device_, "all_reduce", static_cast<int>(u));
        // 3. TODO 2: the first micro-batch's mean starts the accumulator, later ones add to it
        if (micro_steps == 1) continue;
        todo("ddp.cpp", 2,
             "with several micro-batches a step, the step's gradient is the sum of their averaged "
             "gradients, kept from one micro-batch to the next",
             "keep the sum of the micro-batches' means in accum_[u]: copy_into on the first, "
             "add_into on the others (engines/typed_span.hpp)");
      }
    }
    // 4. the norm and the update, the same on every rank
    const float loss = mean_loss_over_ranks(comm_, device_, loss_sum.as<float>(), micro_steps);
    const std::vector<TypedSpan> grads = whole(micro_steps > 1 ? accum_ : grads_);
    const double loss_scale = opt_.scaler.scale();
    const double lr = update_lr(opt_, options_);
    const double grad_norm =
        model_grad_norm(comm_, device_, layout_, grads, loss_scale, /*sharded=*/false);
    const bool update =
        apply_update(grad_norm, step, whole(params_), grads, opt_, options_, device_);
    if (update) notify(options_, device_, "update");
    return {.loss = loss,
            .grad_norm = grad_norm,
            .skipped = !update,
            .loss_scale = loss_scale,
            .lr = lr};
  }

  ModelState full_state() override {
    return whole_model_state(device_, layout_, opt_, whole(params_));
  }
  ShardState shard_state() override { no_checkpoints(); }
  void load_shard_state(const ShardState&) override { no_checkpoints(); }

 private:
  std::vector<TypedSpan> whole(UnitBuffers& buffers) {
    return owned_spans(buffers, layout_, /*shard_of_full=*/false, 0, 1);
  }

  MicroBatchHooks hooks() {
    MicroBatchHooks hooks;
    hooks.params = [this](int u, bool) { return UnitParams{view_of(params_[u]), {}}; };
    hooks.grad_ready = [this](int u, TypedSpan grad) {
      copy_into(device_, grad, view_of(grads_[u]));
    };
    return hooks;
  }

  Model& model_;
  Device& device_;
  Comm& comm_;
  EngineOptions options_;
  TrainingFeatures features_;
  std::vector<UnitLayout> layout_;
  UnitBuffers params_;  // whole units, training dtype
  UnitBuffers grads_;   // this micro-batch's gradients, averaged in place
  UnitBuffers accum_;   // with accumulation: the sum of the averages
  OptimizerState opt_;  // whole model
};

}  // namespace

std::unique_ptr<Engine> make_ddp(Model& model, Device& device, Comm& comm,
                                 const EngineOptions& options) {
  return std::make_unique<DdpExercise>(model, device, comm, options);
}

}  // namespace zl::exercise
