// reference.cpp — the answer key. One process plays all W ranks. Per step, for each of the k
// accumulated micro-batches:
//   1. forward + backward each rank's micro-batch into that rank's own gradient buffers (in the
//      training dtype, as each rank would hand them to the collectives)
//   2. average the W gradients with the collectives' reduction (rank order, by node when the world
//      has nodes, then / W), and add the average into the step's gradient (the first
//      micro-batch's average is copied)
// then
//   3. one optimizer step over the whole model: unscale, canonical norm, skip or clip, AdamW on
//      the fp32 master (optimizer_step.hpp)
// It shares the kernels, the reduction and the optimizer step with every engine, nothing else.
#include "comm/reduce.hpp"
#include "engines/engine.hpp"
#include "engines/micro_batch.hpp"
#include "engines/optimizer_step.hpp"
#include "engines/sharding.hpp"
#include "optim/grad_norm.hpp"

namespace zl {

namespace {

class ReferenceEngine final : public Engine {
 public:
  ReferenceEngine(Model& model, Device& device, int world, const EngineOptions& options,
                  int gpus_per_node)
      : model_(model),
        device_(device),
        world_(world),
        gpus_per_node_(gpus_per_node),
        options_(options),
        features_(options.features),
        layout_(layout_units(model.units(), 1)),
        params_(alloc_params(device, layout_, features_.precision, /*shard=*/false)),
        grads_(alloc_units(device, layout_, MemCategory::Grads, false, features_.precision)),
        opt_(alloc_optimizer(device, layout_, features_, /*shard=*/false)) {
    ZL_CHECK(world >= 1, "world size {} is invalid: use --world 1 or more", world);
    validate(features_);
    for (int r = 0; r < world; ++r) {
      rank_grads_.push_back(
          alloc_units(device, layout_, MemCategory::Grads, false, features_.precision));
    }
    init_params(model_, layout_, params_, options_.seed, device_);
    master_from_params(opt_, owned(), device_);
  }

  StepStats step(std::int64_t step) override {
    const std::int64_t micro_steps = features_.grad_accum_steps;
    // Each rank's loss is the mean of its micro-batch losses, as each engine reports it.
    Buffer loss_sums = device_.alloc(MemCategory::CommBuffer, DType::F32, {world_});
    const std::span<float> rank_losses = loss_sums.as<float>();
    for (std::int64_t k = 0; k < micro_steps; ++k) {
      for (int r = 0; r < world_; ++r) {
        run_rank(step * micro_steps + k, r, rank_losses.subspan(static_cast<std::size_t>(r), 1));
      }
      average_rank_grads(/*first=*/k == 0);
    }
    device_.divide(rank_losses, static_cast<float>(micro_steps));
    std::vector<float> losses(static_cast<std::size_t>(world_));
    device_.copy_to_host(losses.data(), loss_sums.data(), losses.size() * sizeof(float));
    const std::vector<TypedSpan> grads = owned_grads();
    const double loss_scale = opt_.scaler.scale();  // what backward multiplied by
    const double lr = update_lr(opt_, options_);  // before the update moves the schedule
    const double grad_norm =
        norm_from_partials(unscaled_partials(grads, loss_scale, device_));
    const bool update = optimizer_step(grad_norm, step, owned(), grads, opt_, options_, device_);
    return {.loss = mean_over_ranks(losses),
            .grad_norm = grad_norm,
            .skipped = !update,
            .loss_scale = loss_scale,
            .lr = lr};
  }

  ModelState full_state() override {
    return whole_model_state(device_, layout_, opt_, owned());
  }

  ShardState shard_state() override {
    fail("the reference engine keeps no shards: checkpoint a distributed engine (--stage 0..3)");
  }

  void load_shard_state(const ShardState&) override {
    fail("the reference engine keeps no shards: resume with a distributed engine (--stage 0..3)");
  }

 private:
  std::vector<TypedSpan> owned() { return owned_spans(params_, layout_, false, 0, 1); }
  std::vector<TypedSpan> owned_grads() { return owned_spans(grads_, layout_, false, 0, 1); }

  // Rank r's micro-batch gradients into rank_grads_[r], as that rank computes them; its loss is
  // added into loss_sum.
  void run_rank(std::int64_t micro_step, int r, std::span<float> loss_sum) {
    MicroBatchHooks hooks;
    hooks.params = [this](int u, bool) { return UnitParams{view_of(params_[u]), {}}; };
    hooks.grad_ready = [this, r](int u, TypedSpan grad) {
      copy_into(device_, grad, view_of(rank_grads_[r][u]));
    };
    run_micro_batch(model_, options_.batch(micro_step, r), layout_, features_.precision,
                    grad_scale_of(opt_, features_), hooks, options_, device_, loss_sum);
  }

  // average = reduce_rank_order(rank_grads_[0][u], ..., rank_grads_[W-1][u], Avg); the step's
  // gradient is the first average, plus each later one (add_into: one rounding per addition).
  void average_rank_grads(bool first) {
    std::vector<const void*> inputs(static_cast<std::size_t>(world_));
    for (std::size_t u = 0; u < layout_.size(); ++u) {
      for (int r = 0; r < world_; ++r) inputs[r] = rank_grads_[r][u].data();
      Buffer average = device_.alloc(MemCategory::CommBuffer, features_.precision,
                                     {layout_[u].padded_elems});
      reduce_rank_order(inputs, average.data(), static_cast<std::size_t>(layout_[u].padded_elems),
                        features_.precision, ReduceOp::Avg, gpus_per_node_);
      if (first) {
        copy_into(device_, view_of(average), view_of(grads_[u]));
      } else {
        add_into(device_, view_of(grads_[u]), view_of(average));
      }
    }
  }

  // The loss a distributed run reports: all_reduce(avg) of the W micro-batch losses.
  float mean_over_ranks(const std::vector<float>& losses) const {
    std::vector<const void*> inputs;
    for (const float& loss : losses) inputs.push_back(&loss);
    float mean = 0.0f;
    reduce_rank_order(inputs, &mean, 1, DType::F32, ReduceOp::Avg, gpus_per_node_);
    return mean;
  }

  Model& model_;
  Device& device_;
  int world_;
  int gpus_per_node_;  // the collectives' node layout (comm/reduce.hpp)
  EngineOptions options_;
  TrainingFeatures features_;
  std::vector<UnitLayout> layout_;  // laid out for one rank: the reference never shards
  UnitBuffers params_;              // training dtype
  UnitBuffers grads_;               // the step's averaged gradient, training dtype
  OptimizerState opt_;
  std::vector<UnitBuffers> rank_grads_;  // rank_grads_[r]: rank r's micro-batch gradients
};

}  // namespace

std::unique_ptr<Engine> make_reference_engine(Model& model, Device& device, int world,
                                              const EngineOptions& options, int gpus_per_node) {
  return std::make_unique<ReferenceEngine>(model, device, world, options, gpus_per_node);
}

}  // namespace zl
