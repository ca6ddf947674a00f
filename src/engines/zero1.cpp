// zero1.cpp — ZeRO stage 1: shard the optimizer state. Parameters and gradients stay whole on
// every rank (4 + 4 bytes per parameter); Adam's moments exist only for the own shard (8/N).
// Per step:
//   1. forward         this rank's micro-batch, unit by unit
//   2. backward        unit by unit, into full per-unit gradient buffers
//   3. reduce_scatter  each unit's gradients (avg), in place: the own slice now holds the mean
//   4. update          AdamW on the own shard only: params, averaged grads, moments
//   5. all_gather      each unit's parameters, in place: every rank is whole again
// Traffic: reduce-scatter plus all-gather is the same 2 Psi (N-1)/N as DDP's all-reduce.
#include "engines/engine.hpp"
#include "engines/sharding.hpp"

namespace zl {

namespace {

class Zero1Engine final : public Engine {
 public:
  Zero1Engine(Model& model, Device& device, Comm& comm, const EngineOptions& options)
      : model_(model),
        device_(device),
        comm_(comm),
        options_(options),
        layout_(layout_units(model.units(), comm.size())),
        params_(alloc_units(device, layout_, MemCategory::Params)),
        grads_(alloc_units(device, layout_, MemCategory::Grads)),
        adam_(alloc_adam(device, layout_, /*shard=*/true)) {
    init_params(model_, layout_, params_, options_.seed);
  }

  StepStats step(std::int64_t step) override {
    // 1. forward and 2. backward this rank's micro-batch into full per-unit gradients
    zero_units(grads_);
    const Batch batch = options_.batch(step, comm_.rank());
    const float loss = forward_backward(model_, batch, layout_, params_, grads_, options_, device_);
    // 3. reduce_scatter: the own slice of each unit's gradient becomes the mean
    const UnitSpans grad_shards = own_shards(grads_, layout_, comm_.rank(), comm_.size());
    for (std::size_t u = 0; u < layout_.size(); ++u) {
      reduce_scatter_unit(comm_, grads_[u].as<float>(), grad_shards[u]);
      notify(options_, device_, "reduce_scatter", static_cast<int>(u));
    }
    const double grad_norm = sharded_grad_norm(comm_, device_, layout_, grad_shards);
    // 4. update the own shard only (unless the norm is not finite: then no rank updates)
    const bool update = should_update(grad_norm, step, options_);
    if (update) {
      const UnitSpans param_shards = own_shards(params_, layout_, comm_.rank(), comm_.size());
      adamw_units(param_shards, grad_shards, adam_, options_.adamw);
      notify(options_, device_, "update");
    }
    // 5. all_gather: every rank's parameters are whole again
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
  UnitBuffers params_;  // full
  UnitBuffers grads_;   // full; after step 3 only the own slice holds the average
  AdamState adam_;      // own shard
};

}  // namespace

std::unique_ptr<Engine> make_zero1_engine(Model& model, Device& device, Comm& comm,
                                          const EngineOptions& options) {
  return std::make_unique<Zero1Engine>(model, device, comm, options);
}

}  // namespace zl
