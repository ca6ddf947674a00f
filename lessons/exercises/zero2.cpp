// zero2.cpp — exercise 3: ZeRO stage 2 shards the gradients too. Parameters stay whole;
// each rank keeps only the own shard of the averaged gradients, and a unit's full gradient lives
// only from its backward until its reduce-scatter has started. Per step, for each of the k
// accumulated micro-batches:
//   1. forward, then backward unit by unit, last first; as soon as unit u's gradient is
//      complete, copy it into a bucket and start an async reduce_scatter (avg) of it, so
//      backward goes on while it runs                                             (TODO 1)
//   2. when backward is done, wait for every reduce-scatter: the first micro-batch's means
//      become the gradient shards, later ones are added to them                   (TODO 2)
// then
//   3. the norm from every rank's shards, and AdamW on the own shard only
//   4. all_gather each unit's parameters: every rank is whole again               (TODO 3)
// A bucket may be freed only once its reduce-scatter is complete: the collective reads it until
// wait() returns.
#include <utility>

#include "exercise.hpp"

namespace zl::exercise {

namespace {

class Zero2Exercise final : public Engine {
 public:
  Zero2Exercise(Model& model, Device& device, Comm& comm, const EngineOptions& options)
      : model_(model),
        device_(device),
        comm_(comm),
        options_(options),
        features_(options.features),
        layout_(layout_units(model.units(), comm.size())),
        params_(alloc_params(device, layout_, features_.precision, /*shard=*/false)),
        grad_shards_(
            alloc_units(device, layout_, MemCategory::Grads, /*shard=*/true, features_.precision)),
        opt_(alloc_optimizer(device, layout_, features_, /*shard=*/true)) {
    init_params(model_, layout_, params_, options_.seed, device_);
    master_from_params(opt_, own_params(), device_);
  }

  StepStats step(std::int64_t step) override {
    const std::int64_t micro_steps = features_.grad_accum_steps;
    Buffer loss_sum = step_loss_sum(device_);  // the losses, added on the device
    for (std::int64_t k = 0; k < micro_steps; ++k) {
      // 1. forward and backward; each unit's reduce-scatter starts in backward (hooks())
      const Batch batch = options_.batch(step * micro_steps + k, comm_.rank());
      run_micro_batch(model_, batch, layout_, features_.precision, grad_scale_of(opt_, features_),
                      hooks(), options_, device_, loss_sum.as<float>());
      // 2. TODO 2: wait for every reduce-scatter, then write (first micro-batch) or add the
      //    mean into the unit's gradient shard
      for ([[maybe_unused]] Reduction& reduction : reductions_) {
        todo("zero2.cpp", 2,
             "before the update every reduction started in backward must have finished; its result "
             "is this rank's gradient shard (first micro-batch) or adds to it",
             "wait() for the reduction, then copy_into (k == 0) or add_into the unit's "
             "grad_shards_ its mean");
      }
      reductions_.clear();
    }
    // 3. the norm from every rank's shards, then AdamW on the own shard
    const float loss = mean_loss_over_ranks(comm_, device_, loss_sum.as<float>(), micro_steps);
    const std::vector<TypedSpan> grads = owned_spans(grad_shards_, layout_, false, 0, 1);
    const double loss_scale = opt_.scaler.scale();
    const double lr = update_lr(opt_, options_);
    const double grad_norm =
        model_grad_norm(comm_, device_, layout_, grads, loss_scale, /*sharded=*/true);
    const bool update = apply_update(grad_norm, step, own_params(), grads, opt_, options_, device_);
    if (update) notify(options_, device_, "update");
    // 4. TODO 3: every rank sends its updated shard and receives the whole unit, in place
    const std::vector<TypedSpan> param_shards = own_params();
    for (std::size_t u = 0; u < layout_.size(); ++u) {
      todo("zero2.cpp", 3,
           "after the update each rank holds only its own shard up to date, and every rank needs "
           "the whole unit for the next forward",
           "all_gather every rank's param_shards[u] into the whole params_[u], in place");
      notify(options_, device_, "all_gather", static_cast<int>(u));
    }
    return {.loss = loss,
            .grad_norm = grad_norm,
            .skipped = !update,
            .loss_scale = loss_scale,
            .lr = lr};
  }

  ModelState full_state() override {
    return gather_model_state(comm_, device_, layout_, opt_, own_params());
  }
  ShardState shard_state() override { no_checkpoints(); }
  void load_shard_state(const ShardState&) override { no_checkpoints(); }

 private:
  // A reduce-scatter started in backward: the bucket it reads, the mean it writes, its handle.
  struct Reduction {
    int unit = 0;
    Buffer bucket;  // a copy of the unit's full gradient: the collective reads it until wait()
    Buffer mean;    // the own shard of the average, complete after wait()
    CommHandle handle;
  };

  std::vector<TypedSpan> own_params() {
    return owned_spans(params_, layout_, /*shard_of_full=*/true, comm_.rank(), comm_.size());
  }

  MicroBatchHooks hooks() {
    MicroBatchHooks hooks;
    hooks.params = [this](int u, bool) { return UnitParams{view_of(params_[u]), {}}; };
    // TODO 1: `grad` is valid only during this call: copy it into a bucket (a CommBuffer), start
    // the reduce-scatter of the bucket into a shard-sized buffer, and keep both until wait()
    hooks.grad_ready = [this](int u, [[maybe_unused]] TypedSpan grad) {
      todo("zero2.cpp", 1,
           "start reducing a unit's gradient as soon as backward completes it and go on with "
           "backward while it travels; what it sends must stay untouched until the reduction is "
           "done",
           "allocate the bucket and the mean (device_.alloc), copy_into the bucket, start "
           "comm_.reduce_scatter_async and push the Reduction onto reductions_");
      notify(options_, device_, "reduce_scatter", u);
    };
    return hooks;
  }

  Model& model_;
  Device& device_;
  Comm& comm_;
  EngineOptions options_;
  TrainingFeatures features_;
  std::vector<UnitLayout> layout_;
  UnitBuffers params_;                 // whole units, training dtype
  UnitBuffers grad_shards_;            // own shard of the averaged (accumulated) gradients
  OptimizerState opt_;                 // own shard
  std::vector<Reduction> reductions_;  // started in this micro-batch's backward
};

}  // namespace

std::unique_ptr<Engine> make_zero2(Model& model, Device& device, Comm& comm,
                                   const EngineOptions& options) {
  return std::make_unique<Zero2Exercise>(model, device, comm, options);
}

}  // namespace zl::exercise
