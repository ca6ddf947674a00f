// zero3.cpp — ZeRO stage 3: shard the parameters too. Each rank keeps only its shard of
// parameters (4/N), gradients (4/N) and Adam's moments (8/N); a unit's full parameters exist only
// while that unit computes. Per step:
//   1. forward    for each unit: all_gather its parameters, run it, release them
//   2. backward   for each unit, last first: all_gather its parameters again, run its backward
//                 into a full gradient buffer, reduce_scatter that (avg) into the own gradient
//                 shard, release both
//   3. update     AdamW on the own shard; no all-gather afterwards: the next step gathers
// Traffic: two all-gathers and one reduce-scatter, 3 Psi (N-1)/N: 1.5x DDP.
#include <algorithm>

#include "engines/engine.hpp"
#include "engines/sharding.hpp"

namespace zl {

namespace {

class Zero3Engine final : public Engine {
 public:
  Zero3Engine(Model& model, Device& device, Comm& comm, const EngineOptions& options)
      : model_(model),
        device_(device),
        comm_(comm),
        options_(options),
        layout_(layout_units(model.units(), comm.size())),
        param_shards_(alloc_units(device, layout_, MemCategory::Params, /*shard=*/true)),
        grad_shards_(alloc_units(device, layout_, MemCategory::Grads, /*shard=*/true)),
        adam_(alloc_adam(device, layout_, /*shard=*/true)) {
    init_own_shards();
  }

  StepStats step(std::int64_t step) override {
    // 1. forward: gather each unit, run it, release it
    const int units = static_cast<int>(layout_.size());
    model_.begin(options_.batch(step, comm_.rank()));
    for (int u = 0; u < units; ++u) {
      const Buffer params = gather(u);
      model_.forward_unit(u, params.as<float>());
      notify(options_, device_, "forward", u);
    }  // params is released at the end of each iteration
    const float loss = model_.loss();
    // 2. backward, last unit first: gather again, run, reduce_scatter the gradient, release both
    for (int u = units - 1; u >= 0; --u) {
      const Buffer params = gather(u);
      Buffer full_grad = device_.alloc(MemCategory::Grads, DType::F32, {layout_[u].padded_elems});
      model_.backward_unit(u, params.as<float>(), full_grad.as<float>());
      notify(options_, device_, "backward", u);
      reduce_scatter_unit(comm_, full_grad.as<float>(), grad_shards_[u].as<float>());
      notify(options_, device_, "reduce_scatter", u);
    }
    const double grad_norm = sharded_grad_norm(comm_, device_, layout_, spans_of(grad_shards_));
    // 3. update the own shard (unless the norm is not finite); the next step gathers what it needs
    const bool update = should_update(grad_norm, step, options_);
    if (update) {
      adamw_units(spans_of(param_shards_), spans_of(grad_shards_), adam_, options_.adamw);
      notify(options_, device_, "update");
    }
    return {.loss = loss, .grad_norm = grad_norm, .skipped = !update};
  }

  ModelState full_state() override {
    return {gather_unpadded(comm_, device_, layout_, spans_of(param_shards_)),
            gather_unpadded(comm_, device_, layout_, spans_of(adam_.exp_avg)),
            gather_unpadded(comm_, device_, layout_, spans_of(adam_.exp_avg_sq))};
  }

  ShardState shard_state() override {
    return {copy_shards(spans_of(param_shards_)), copy_shards(spans_of(adam_.exp_avg)),
            copy_shards(spans_of(adam_.exp_avg_sq)), adam_.updates};
  }

  void load_shard_state(const ShardState& state) override {
    assign_shards(spans_of(param_shards_), state.params);
    assign_shards(spans_of(adam_.exp_avg), state.exp_avg);
    assign_shards(spans_of(adam_.exp_avg_sq), state.exp_avg_sq);
    adam_.updates = state.adam_updates;
  }

 private:
  Buffer gather(int unit) {
    Buffer params = gather_unit(comm_, device_, layout_[unit], param_shards_[unit].as<float>());
    notify(options_, device_, "gather", unit);
    return params;
  }

  // Every rank runs the (deterministic) init of one unit at a time and keeps its own slice.
  void init_own_shards() {
    for (std::size_t u = 0; u < layout_.size(); ++u) {
      Buffer full = device_.alloc(MemCategory::Gathered, DType::F32, {layout_[u].padded_elems});
      model_.init_unit(static_cast<int>(u), full.as<float>().first(layout_[u].numel),
                       options_.seed);
      const ShardRange shard = shard_of(layout_[u], comm_.rank(), comm_.size());
      std::copy(full.as<float>().begin() + shard.begin, full.as<float>().begin() + shard.end,
                param_shards_[u].as<float>().begin());
    }
  }

  Model& model_;
  Device& device_;
  Comm& comm_;
  EngineOptions options_;
  std::vector<UnitLayout> layout_;
  UnitBuffers param_shards_;  // own shard of the parameters
  UnitBuffers grad_shards_;   // own shard of the averaged gradients
  AdamState adam_;            // own shard
};

}  // namespace

std::unique_ptr<Engine> make_zero3_engine(Model& model, Device& device, Comm& comm,
                                          const EngineOptions& options) {
  return std::make_unique<Zero3Engine>(model, device, comm, options);
}

}  // namespace zl
