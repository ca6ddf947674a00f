// zero1.cpp — exercise 2, solved: ZeRO stage 1 shards the optimizer state. Parameters and
// gradients stay whole on every rank; the fp32 master and Adam's moments exist only for the own
// shard: elements [r * S, (r + 1) * S) of every unit for rank r, S = padded_elems / W. Per step,
// for each of the k accumulated micro-batches:
//   1. forward and backward this rank's micro-batch into full per-unit gradients
//   2. reduce_scatter (avg) each unit's gradients: the own shard now holds the mean    (TODO 2)
//   3. with k > 1, keep the sum of the own shard's means in an accumulator           (TODO 3)
// then
//   4. the norm from every rank's shards, and AdamW on the own shard only
//   5. all_gather each unit's parameters: every rank is whole again                  (TODO 4)
// Which elements are "the own shard" is TODO 1.
#include "exercise.hpp"

namespace zl::exercise {

namespace {

class Zero1Exercise final : public Engine {
 public:
  Zero1Exercise(Model& model, Device& device, Comm& comm, const EngineOptions& options)
      : model_(model),
        device_(device),
        comm_(comm),
        options_(options),
        features_(options.features),
        layout_(layout_units(model.units(), comm.size())),
        params_(alloc_params(device, layout_, features_.precision, /*shard=*/false)),
        grads_(alloc_units(device, layout_, MemCategory::Grads, false, features_.precision)),
        opt_(alloc_optimizer(device, layout_, features_, /*shard=*/true)) {
    if (features_.grad_accum_steps > 1) {
      accum_ =
          alloc_units(device, layout_, MemCategory::Grads, /*shard=*/true, features_.precision);
    }
    init_params(model_, layout_, params_, options_.seed, device_);
    master_from_params(opt_, own(params_), device_);
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
      const std::vector<TypedSpan> grad_shards = own(grads_);
      for (std::size_t u = 0; u < layout_.size(); ++u) {
        // 2. TODO 2: the own shard of unit u's gradient becomes the average over the ranks
        comm_.reduce_scatter(grads_[u].data(), grad_shards[u].data,
                             static_cast<std::size_t>(grad_shards[u].elems), features_.precision,
                             ReduceOp::Avg);
        notify(options_, device_, "reduce_scatter", static_cast<int>(u));
        // 3. TODO 3: the first micro-batch's mean starts the accumulator, later ones add to it
        if (micro_steps == 1) continue;
        if (k == 0) {
          copy_into(device_, grad_shards[u], view_of(accum_[u]));
        } else {
          add_into(device_, view_of(accum_[u]), grad_shards[u]);
        }
      }
    }
    // 4. the norm from every rank's shards, then AdamW on the own shard
    const float loss = mean_loss_over_ranks(comm_, device_, loss_sum.as<float>(), micro_steps);
    const std::vector<TypedSpan> grads =
        micro_steps > 1 ? owned_spans(accum_, layout_, false, 0, 1) : own(grads_);
    const double loss_scale = opt_.scaler.scale();
    const double lr = update_lr(opt_, options_);
    const double grad_norm =
        model_grad_norm(comm_, device_, layout_, grads, loss_scale, /*sharded=*/true);
    const bool update = apply_update(grad_norm, step, own(params_), grads, opt_, options_, device_);
    if (update) notify(options_, device_, "update");
    // 5. TODO 4: every rank sends its updated shard and receives the whole unit, in place
    const std::vector<TypedSpan> param_shards = own(params_);
    for (std::size_t u = 0; u < layout_.size(); ++u) {
      comm_.all_gather(param_shards[u].data, params_[u].data(),
                       static_cast<std::size_t>(param_shards[u].elems), features_.precision);
      notify(options_, device_, "all_gather", static_cast<int>(u));
    }
    return {.loss = loss,
            .grad_norm = grad_norm,
            .skipped = !update,
            .loss_scale = loss_scale,
            .lr = lr};
  }

  ModelState full_state() override {
    return gather_model_state(comm_, device_, layout_, opt_, own(params_));
  }
  ShardState shard_state() override { no_checkpoints(); }
  void load_shard_state(const ShardState&) override { no_checkpoints(); }

 private:
  // TODO 1: this rank's shard of every unit of `full`: S = padded_elems / W elements from r * S
  std::vector<TypedSpan> own(UnitBuffers& full) {
    std::vector<TypedSpan> shards;
    for (std::size_t u = 0; u < layout_.size(); ++u) {
      const std::int64_t shard_elems = layout_[u].padded_elems / comm_.size();
      shards.push_back(view_of(full[u]).slice(comm_.rank() * shard_elems, shard_elems));
    }
    return shards;
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
  UnitBuffers grads_;   // whole; after the reduce-scatter only the own shard holds the mean
  UnitBuffers accum_;   // with accumulation: the own shard of the sum of the means
  OptimizerState opt_;  // own shard
};

}  // namespace

std::unique_ptr<Engine> make_zero1(Model& model, Device& device, Comm& comm,
                                   const EngineOptions& options) {
  return std::make_unique<Zero1Exercise>(model, device, comm, options);
}

}  // namespace zl::exercise
