// ddp_test.cpp — DDP against the reference, bit for bit, and its ledgers against the formulas.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "support/arbitrary.hpp"
#include "support/compare.hpp"

namespace zl {
namespace {

TrainResult run(TrainConfig config, EngineKind engine) {
  config.engine = engine;
  return train(config);
}

// The promise: for any shape, world, step count and hyperparameters, DDP's final parameters,
// Adam moments, per-step losses and gradient norms are the reference's, bit for bit.
RC_GTEST_PROP(Ddp, prop_ddp_is_bitwise_the_reference, (const TrainConfig& config)) {
  const auto reference = run(config, EngineKind::Reference);
  const auto ddp = run(config, EngineKind::Ddp);
  if (const auto diff = first_difference(ddp, reference)) RC_FAIL(*diff);
}

TrainConfig small_config() {
  TrainConfig config;
  config.world = 3;
  config.steps = 3;
  config.micro_batch = 4;
  config.mlp = {.layers = 3, .width = 10, .in = 5, .classes = 4};
  config.adamw.lr = 0.05;
  config.seed = 17;
  return config;
}

// The comparison can fail: runs that differ in what they compute do differ in bits.
TEST(Ddp, ComparisonSeesRealDifferences) {
  const TrainConfig config = small_config();
  const auto ddp = run(config, EngineKind::Ddp);
  TrainConfig other_world = config;
  other_world.world = 2;  // different global batch
  EXPECT_TRUE(first_difference(run(other_world, EngineKind::Reference), ddp));
  TrainConfig other_lr = config;
  other_lr.adamw.lr = 0.0500001;
  EXPECT_TRUE(first_difference(run(other_lr, EngineKind::Ddp), ddp));
  // Training moved the parameters away from init.
  EXPECT_TRUE(first_difference("params", initial_params(config), ddp.final_state.params));
}

// Memory: every rank holds 4 bytes each of params and grads and 8 of Adam state per padded
// parameter: 16 Psi bytes (ZeRO paper, Section 3, fp32 training).
TEST(Ddp, MemoryLedgerMatchesSixteenPsi) {
  const TrainConfig config = small_config();
  const auto result = run(config, EngineKind::Ddp);
  const std::int64_t psi = total_padded_elems(result.layout);
  ASSERT_EQ(result.ranks.size(), 3u);
  for (const auto& rank : result.ranks) {
    EXPECT_EQ(rank.memory.peak_bytes(MemCategory::Params), 4 * psi);
    EXPECT_EQ(rank.memory.peak_bytes(MemCategory::Grads), 4 * psi);
    EXPECT_EQ(rank.memory.peak_bytes(MemCategory::Optimizer), 8 * psi);
    EXPECT_GT(rank.memory.peak_bytes(MemCategory::Activations), 0);
  }
}

// Traffic: one ring all_reduce of the padded gradients per step, 2 (W-1)/W * 4 Psi bytes sent per
// rank, plus the logged loss: a one-element all_reduce whose only ring chunk is chunk 0, so every
// rank but W-1 (which never forwards chunk 0) sends it twice (reduce-scatter and all-gather pass).
TEST(Ddp, TrafficMatchesRingVolumes) {
  for (int world : {1, 2, 3, 4, 8}) {
    TrainConfig config = small_config();
    config.world = world;
    const auto result = run(config, EngineKind::Ddp);
    const std::int64_t psi = total_padded_elems(result.layout);
    const std::int64_t grads_per_step = 2 * (world - 1) * 4 * psi / world;
    for (const auto& rank : result.ranks) {
      const std::int64_t loss_per_step = (world > 1 && rank.rank != world - 1) ? 2 * 4 : 0;
      EXPECT_EQ(rank.traffic.sent_bytes(), config.steps * (grads_per_step + loss_per_step))
          << "world " << world << " rank " << rank.rank;
      EXPECT_EQ(rank.traffic.calls(CollectiveKind::AllReduce),
                config.steps * (static_cast<std::int64_t>(result.layout.size()) + 1));
    }
  }
}

TEST(Ddp, DemoShapeLearns) {
  TrainConfig config;
  config.world = 4;
  config.steps = 60;
  config.mlp = {.layers = 3, .width = 64, .in = 16, .classes = 8};
  config.adamw.lr = 3e-3;
  const auto result = run(config, EngineKind::Ddp);
  EXPECT_LT(result.steps.back().loss, 0.5f * result.steps.front().loss);
}

}  // namespace
}  // namespace zl
