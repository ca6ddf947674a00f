// reference.cpp — the answer key. One process plays all W ranks. Per step:
//   1. forward + backward each rank's micro-batch into that rank's own gradient buffers
//   2. average the W gradients with the collectives' reduction (rank order, then / W)
//   3. one AdamW over the whole model (none when the gradient norm is not finite, see
//      NonFinitePolicy)
// It shares the kernels, the reduction and the AdamW function with every engine, nothing else.
#include "comm/reduce.hpp"
#include "engines/engine.hpp"
#include "engines/unit_buffers.hpp"

namespace zl {

namespace {

class ReferenceEngine final : public Engine {
 public:
  ReferenceEngine(Model& model, Device& device, int world, const EngineOptions& options)
      : model_(model),
        device_(device),
        world_(world),
        options_(options),
        layout_(layout_units(model.units(), 1)),
        params_(alloc_units(device, layout_, MemCategory::Params)),
        grads_(alloc_units(device, layout_, MemCategory::Grads)),
        adam_(alloc_adam(device, layout_)) {
    ZL_CHECK(world >= 1, "world size {} is invalid: use --world 1 or more", world);
    for (int r = 0; r < world; ++r)
      rank_grads_.push_back(alloc_units(device, layout_, MemCategory::Grads));
    init_params(model_, layout_, params_, options_.seed);
  }

  StepStats step(std::int64_t step) override {
    std::vector<float> losses(static_cast<std::size_t>(world_));
    for (int r = 0; r < world_; ++r) {
      zero_units(rank_grads_[r]);
      losses[r] = forward_backward(model_, options_.batch(step, r), layout_, params_,
                                   rank_grads_[r], options_, device_);
    }
    average_rank_grads();
    const double grad_norm = grad_norm_of(grads_);
    const bool update = should_update(grad_norm, step, options_);
    if (update) adamw_units(spans_of(params_), spans_of(grads_), adam_, options_.adamw);
    return {.loss = mean_over_ranks(losses), .grad_norm = grad_norm, .skipped = !update};
  }

  ModelState full_state() override { return model_state(layout_, params_, adam_); }

  ShardState shard_state() override {
    fail("the reference engine keeps no shards: checkpoint a distributed engine (--stage 0..3)");
  }

  void load_shard_state(const ShardState&) override {
    fail("the reference engine keeps no shards: resume with a distributed engine (--stage 0..3)");
  }

 private:
  // grads_[u] = reduce_rank_order(rank_grads_[0][u], ..., rank_grads_[W-1][u], Avg)
  void average_rank_grads() {
    std::vector<const void*> inputs(static_cast<std::size_t>(world_));
    for (std::size_t u = 0; u < layout_.size(); ++u) {
      for (int r = 0; r < world_; ++r) inputs[r] = rank_grads_[r][u].data();
      reduce_rank_order(inputs, grads_[u].data(), static_cast<std::size_t>(layout_[u].padded_elems),
                        DType::F32, ReduceOp::Avg);
    }
  }

  // The loss a distributed run reports: all_reduce(avg) of the W micro-batch losses.
  static float mean_over_ranks(const std::vector<float>& losses) {
    std::vector<const void*> inputs;
    for (const float& loss : losses) inputs.push_back(&loss);
    float mean = 0.0f;
    reduce_rank_order(inputs, &mean, 1, DType::F32, ReduceOp::Avg);
    return mean;
  }

  Model& model_;
  Device& device_;
  int world_;
  EngineOptions options_;
  std::vector<UnitLayout> layout_;  // laid out for one rank: the reference never shards
  UnitBuffers params_;
  UnitBuffers grads_;  // the average over ranks
  AdamState adam_;
  std::vector<UnitBuffers> rank_grads_;  // rank_grads_[r]: rank r's micro-batch gradients
};

}  // namespace

std::unique_ptr<Engine> make_reference_engine(Model& model, Device& device, int world,
                                              const EngineOptions& options) {
  return std::make_unique<ReferenceEngine>(model, device, world, options);
}

}  // namespace zl
