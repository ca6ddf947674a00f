// zero3.cpp — exercise 4, solved: ZeRO stage 3 shards the parameters too. Each rank keeps only
// the own shard of every unit's parameters, gradients, master and Adam moments; a unit's full
// parameters exist only while it computes. Per step, for each of the k accumulated
// micro-batches:
//   1. forward: for each unit, all_gather its parameters, run it, release them      (TODO 1)
//   2. backward: for each unit, last first, all_gather its parameters again, run its
//      backward, reduce_scatter (avg) the gradient into the own gradient shard (written by
//      the first micro-batch, added to by later ones), release both                 (TODO 2)
// then
//   3. the norm from every rank's shards, and AdamW on the own shard; no all-gather: the next
//      step gathers what it needs
#include "exercise.hpp"

namespace zl::exercise {

namespace {

class Zero3Exercise final : public Engine {
 public:
  Zero3Exercise(Model& model, Device& device, Comm& comm, const EngineOptions& options)
      : model_(model),
        device_(device),
        comm_(comm),
        options_(options),
        features_(options.features),
        layout_(layout_units(model.units(), comm.size())),
        param_shards_(alloc_params(device, layout_, features_.precision, /*shard=*/true)),
        grad_shards_(
            alloc_units(device, layout_, MemCategory::Grads, /*shard=*/true, features_.precision)),
        opt_(alloc_optimizer(device, layout_, features_, /*shard=*/true)) {
    init_own_shards();
    master_from_params(opt_, shards(param_shards_), device_);
  }

  StepStats step(std::int64_t step) override {
    const std::int64_t micro_steps = features_.grad_accum_steps;
    Buffer loss_sum = step_loss_sum(device_);  // the losses, added on the device
    for (std::int64_t k = 0; k < micro_steps; ++k) {
      // 1. forward and 2. backward, gathering each unit for each visit (hooks())
      const Batch batch = options_.batch(step * micro_steps + k, comm_.rank());
      run_micro_batch(model_, batch, layout_, features_.precision, grad_scale_of(opt_, features_),
                      hooks(k == 0), options_, device_, loss_sum.as<float>());
    }
    // 3. the norm from every rank's shards, then AdamW on the own shard
    const float loss = mean_loss_over_ranks(comm_, device_, loss_sum.as<float>(), micro_steps);
    const std::vector<TypedSpan> grads = shards(grad_shards_);
    const double loss_scale = opt_.scaler.scale();
    const double lr = update_lr(opt_, options_);
    const double grad_norm =
        model_grad_norm(comm_, device_, layout_, grads, loss_scale, /*sharded=*/true);
    const bool update =
        apply_update(grad_norm, step, shards(param_shards_), grads, opt_, options_, device_);
    if (update) notify(options_, device_, "update");
    return {.loss = loss,
            .grad_norm = grad_norm,
            .skipped = !update,
            .loss_scale = loss_scale,
            .lr = lr};
  }

  ModelState full_state() override {
    return gather_model_state(comm_, device_, layout_, opt_, shards(param_shards_));
  }
  ShardState shard_state() override { no_checkpoints(); }
  void load_shard_state(const ShardState&) override { no_checkpoints(); }

 private:
  std::vector<TypedSpan> shards(UnitBuffers& buffers) {
    return owned_spans(buffers, layout_, /*shard_of_full=*/false, 0, 1);
  }

  MicroBatchHooks hooks(bool first_micro_batch) {
    MicroBatchHooks hooks;
    // TODO 1: the whole unit for this visit, gathered from every rank's shard into a new buffer
    // (booked as Gathered); returned as `owned`, it is released when the visit ends
    hooks.params = [this](int u, bool) {
      UnitParams params;
      params.owned =
          device_.alloc(MemCategory::Gathered, features_.precision, {layout_[u].padded_elems});
      comm_.all_gather(param_shards_[u].data(), params.owned.data(),
                       static_cast<std::size_t>(layout_[u].shard_elems), features_.precision);
      notify(options_, device_, "gather", u);
      params.view = view_of(params.owned);
      return params;
    };
    // TODO 2: the own shard of the average of unit u's gradient: written by the first
    // micro-batch, added to by later ones (through a shard-sized buffer)
    hooks.grad_ready = [this, first_micro_batch](int u, TypedSpan grad) {
      const TypedSpan shard = view_of(grad_shards_[u]);
      const auto shard_elems = static_cast<std::size_t>(shard.elems);
      if (first_micro_batch) {
        comm_.reduce_scatter(grad.data, shard.data, shard_elems, grad.dtype, ReduceOp::Avg);
      } else {
        Buffer mean = device_.alloc(MemCategory::CommBuffer, grad.dtype, {shard.elems});
        comm_.reduce_scatter(grad.data, mean.data(), shard_elems, grad.dtype, ReduceOp::Avg);
        add_into(device_, shard, view_of(mean));
      }
      notify(options_, device_, "reduce_scatter", u);
    };
    return hooks;
  }

  // Every rank makes each unit's whole (deterministic) init in turn and keeps its own shard.
  void init_own_shards() {
    for (std::size_t u = 0; u < layout_.size(); ++u) {
      const ShardRange own = shard_of(layout_[u], comm_.rank(), comm_.size());
      std::vector<float> whole(static_cast<std::size_t>(layout_[u].padded_elems), 0.0f);
      model_.init_unit(static_cast<int>(u),
                       std::span<float>(whole).first(static_cast<std::size_t>(layout_[u].numel)),
                       options_.seed);
      Buffer staged = device_.alloc(MemCategory::Gathered, DType::F32, {own.size()});
      device_.copy_from_host(staged.data(), whole.data() + own.begin,
                             static_cast<std::size_t>(own.size()) * sizeof(float));
      round_into(device_, staged.as<float>(), view_of(param_shards_[u]));
    }
  }

  Model& model_;
  Device& device_;
  Comm& comm_;
  EngineOptions options_;
  TrainingFeatures features_;
  std::vector<UnitLayout> layout_;
  UnitBuffers param_shards_;  // own shard of every unit, training dtype
  UnitBuffers grad_shards_;   // own shard of the averaged (accumulated) gradients
  OptimizerState opt_;        // own shard
};

}  // namespace

std::unique_ptr<Engine> make_zero3(Model& model, Device& device, Comm& comm,
                                   const EngineOptions& options) {
  return std::make_unique<Zero3Exercise>(model, device, comm, options);
}

}  // namespace zl::exercise
