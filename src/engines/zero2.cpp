// zero2.cpp — ZeRO stage 2: shard gradients too. Parameters stay whole (4 bytes per parameter);
// gradients (4/N) and Adam's moments (8/N) persist only for the own shard. A unit's full gradient
// exists only from its backward until its reduce-scatter. Per step:
//   1. forward         this rank's micro-batch, unit by unit
//   2. backward        unit by unit, last first; as soon as unit u's gradient is ready:
//      reduce_scatter  it (avg) into the own gradient shard, and release the full buffer
//   3. update          AdamW on the own shard
//   4. all_gather      each unit's parameters, in place
// Traffic: 2 Psi (N-1)/N, as DDP.
#include "engines/engine.hpp"
#include "engines/sharding.hpp"

namespace zl {

namespace {

class Zero2Engine final : public Engine {
 public:
  Zero2Engine(Model& model, Device& device, Comm& comm, const EngineOptions& options)
      : model_(model),
        device_(device),
        comm_(comm),
        options_(options),
        layout_(layout_units(model.units(), comm.size())),
        params_(alloc_units(device, layout_, MemCategory::Params)),
        grad_shards_(alloc_units(device, layout_, MemCategory::Grads, /*shard=*/true)),
        adam_(alloc_adam(device, layout_, /*shard=*/true)) {
    init_params(model_, layout_, params_, options_.seed);
  }

  StepStats step(std::int64_t step) override {
    // 1. forward
    const int units = static_cast<int>(layout_.size());
    model_.begin(options_.batch(step, comm_.rank()));
    for (int u = 0; u < units; ++u) {
      model_.forward_unit(u, params_[u].as<float>());
      notify(options_, device_, "forward", u);
    }
    const float loss = model_.loss();
    // 2. backward, last unit first; each unit's full gradient lives only until it is reduced
    for (int u = units - 1; u >= 0; --u) {
      Buffer full_grad = device_.alloc(MemCategory::Grads, DType::F32, {layout_[u].padded_elems});
      model_.backward_unit(u, params_[u].as<float>(), full_grad.as<float>());
      notify(options_, device_, "backward", u);
      reduce_scatter_unit(comm_, full_grad.as<float>(), grad_shards_[u].as<float>());
      notify(options_, device_, "reduce_scatter", u);
    }  // full_grad is released at the end of each iteration
    const double grad_norm = sharded_grad_norm(comm_, device_, layout_, spans_of(grad_shards_));
    // 3. update the own shard only (unless the norm is not finite: then no rank updates)
    const bool update = should_update(grad_norm, step, options_);
    if (update) {
      const UnitSpans param_shards = own_shards(params_, layout_, comm_.rank(), comm_.size());
      adamw_units(param_shards, spans_of(grad_shards_), adam_, options_.adamw);
      notify(options_, device_, "update");
    }
    // 4. all_gather: every rank's parameters are whole again
    all_gather_params(comm_, params_, layout_, options_, device_);
    return {.loss = loss, .grad_norm = grad_norm, .skipped = !update};
  }

  ModelState full_state() override {
    return state_with_sharded_adam(comm_, device_, layout_, params_, adam_);
  }

  ShardState shard_state() override {
    return shard_state_with_sharded_adam(comm_, layout_, params_, adam_);
  }

  void load_shard_state(const ShardState& state) override {
    load_state_with_sharded_adam(comm_, layout_, params_, adam_, state);
  }

 private:
  Model& model_;
  Device& device_;
  Comm& comm_;
  EngineOptions options_;
  std::vector<UnitLayout> layout_;
  UnitBuffers params_;       // full
  UnitBuffers grad_shards_;  // own shard of the averaged gradients
  AdamState adam_;           // own shard
};

}  // namespace

std::unique_ptr<Engine> make_zero2_engine(Model& model, Device& device, Comm& comm,
                                          const EngineOptions& options) {
  return std::make_unique<Zero2Engine>(model, device, comm, options);
}

}  // namespace zl
