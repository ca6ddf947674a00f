// ddp.cpp — data parallelism without sharding: every rank holds the whole model, its gradients
// and its optimizer state (16 bytes per parameter in fp32 Adam). Per step:
//   1. forward   this rank's micro-batch, unit by unit
//   2. backward  unit by unit, gradients into full per-unit buffers
//   3. reduce    all_reduce(avg) each unit's gradients: every rank now holds the mean
//   4. update    AdamW over the whole model, identically on every rank
#include "engines/engine.hpp"
#include "engines/sharding.hpp"

namespace zl {

namespace {

class DdpEngine final : public Engine {
 public:
  DdpEngine(Model& model, Device& device, Comm& comm, const EngineOptions& options)
      : model_(model),
        device_(device),
        comm_(comm),
        options_(options),
        layout_(layout_units(model.units(), comm.size())),
        params_(alloc_units(device, layout_, MemCategory::Params)),
        grads_(alloc_units(device, layout_, MemCategory::Grads)),
        adam_(alloc_adam(device, layout_)) {
    init_params(model_, layout_, params_, options_.seed);
  }

  StepStats step(std::int64_t step) override {
    // 1. forward and 2. backward this rank's micro-batch into full per-unit gradients
    zero_units(grads_);
    const Batch batch = options_.batch(step, comm_.rank());
    const float loss = forward_backward(model_, batch, layout_, params_, grads_, options_, device_);
    // 3. reduce: every rank gets the mean gradient
    reduce_grads();
    const double grad_norm = grad_norm_of(grads_);
    // 4. update the whole model, identically everywhere (unless the norm is not finite)
    const bool update = should_update(grad_norm, step, options_);
    if (update) {
      adamw_units(spans_of(params_), spans_of(grads_), adam_, options_.adamw);
      notify(options_, device_, "update");
    }
    return {.loss = loss, .grad_norm = grad_norm, .skipped = !update};
  }

  ModelState full_state() override { return model_state(layout_, params_, adam_); }

  ShardState shard_state() override {
    const int rank = comm_.rank(), world = comm_.size();
    return {copy_shards(own_shards(params_, layout_, rank, world)),
            copy_shards(own_shards(adam_.exp_avg, layout_, rank, world)),
            copy_shards(own_shards(adam_.exp_avg_sq, layout_, rank, world)), adam_.updates};
  }

  void load_shard_state(const ShardState& state) override {
    load_full_from_shards(comm_, params_, layout_, state.params);
    load_full_from_shards(comm_, adam_.exp_avg, layout_, state.exp_avg);
    load_full_from_shards(comm_, adam_.exp_avg_sq, layout_, state.exp_avg_sq);
    adam_.updates = state.adam_updates;
  }

 private:
  void reduce_grads() {
    for (std::size_t u = 0; u < layout_.size(); ++u) {
      comm_.all_reduce(grads_[u].data(), static_cast<std::size_t>(layout_[u].padded_elems),
                       DType::F32, ReduceOp::Avg);
      notify(options_, device_, "all_reduce", static_cast<int>(u));
    }
  }

  Model& model_;
  Device& device_;
  Comm& comm_;
  EngineOptions options_;
  std::vector<UnitLayout> layout_;
  UnitBuffers params_;
  UnitBuffers grads_;
  AdamState adam_;
};

}  // namespace

std::unique_ptr<Engine> make_ddp_engine(Model& model, Device& device, Comm& comm,
                                        const EngineOptions& options) {
  return std::make_unique<DdpEngine>(model, device, comm, options);
}

}  // namespace zl
