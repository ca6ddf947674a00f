// estimate_test.cpp — the per-stage model-state bytes against the ZeRO paper's numbers (7.5B on
// 64 GPUs in its Figure 1, and the 7B on 8 GPUs tables articles derive from it), typed in by hand.
#include "engines/estimate.hpp"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

#include "core/error.hpp"

namespace zl {
namespace {

// Expected per-rank bytes of one stage: params, grads, optimizer, total.
struct Row {
  std::int64_t params_bytes, grads_bytes, optimizer_bytes, total_bytes;
};

void expect_rows(const EstimateConfig& config, const Row (&rows)[kEstimateStages]) {
  const auto stages = estimate_stages(config);
  ASSERT_EQ(stages.size(), 4u);
  for (int s = 0; s < kEstimateStages; ++s) {
    SCOPED_TRACE(testing::Message() << "stage " << s);
    EXPECT_EQ(stages[s].stage, s);
    EXPECT_EQ(stages[s].params_bytes, rows[s].params_bytes);
    EXPECT_EQ(stages[s].grads_bytes, rows[s].grads_bytes);
    EXPECT_EQ(stages[s].optimizer_bytes, rows[s].optimizer_bytes);
    EXPECT_EQ(stages[s].total_bytes(), rows[s].total_bytes);
  }
}

const EstimateConfig k7bMixed{.params = 7'000'000'000,
                              .world = 8,
                              .dtype = StateDtype::Mixed,
                              .optimizer_bytes_per_param = 12};

// 16Ψ = 112 GB; 4Ψ + 12Ψ/N = 38.5 GB; 2Ψ + 14Ψ/N = 26.25 GB; 16Ψ/N = 14 GB.
TEST(Estimate, Mixed7BOn8GpusMatchesThePaper) {
  expect_rows(k7bMixed, {{14'000'000'000, 14'000'000'000, 84'000'000'000, 112'000'000'000},
                         {14'000'000'000, 14'000'000'000, 10'500'000'000, 38'500'000'000},
                         {14'000'000'000, 1'750'000'000, 10'500'000'000, 26'250'000'000},
                         {1'750'000'000, 1'750'000'000, 10'500'000'000, 14'000'000'000}});
}

// fp32 Adam: 4Ψ + 4Ψ + 8Ψ = 112 GB; 8Ψ + 8Ψ/N = 63 GB; 4Ψ + 12Ψ/N = 38.5 GB; 16Ψ/N = 14 GB.
TEST(Estimate, Fp327BOn8GpusMatchesTheArticles) {
  const EstimateConfig config{.params = 7'000'000'000,
                              .world = 8,
                              .dtype = StateDtype::Fp32,
                              .optimizer_bytes_per_param = 8};
  expect_rows(config, {{28'000'000'000, 28'000'000'000, 56'000'000'000, 112'000'000'000},
                       {28'000'000'000, 28'000'000'000, 7'000'000'000, 63'000'000'000},
                       {28'000'000'000, 3'500'000'000, 7'000'000'000, 38'500'000'000},
                       {3'500'000'000, 3'500'000'000, 7'000'000'000, 14'000'000'000}});
}

// The paper's Figure 1: Ψ = 7.5B, N = 64, K = 12 gives 120, 31.4, 16.6 and 1.9 GB.
TEST(Estimate, PaperFigure1) {
  const EstimateConfig config{.params = 7'500'000'000, .world = 64};
  const auto stages = estimate_stages(config);
  EXPECT_EQ(stages[0].total_bytes(), 120'000'000'000);
  EXPECT_EQ(stages[1].total_bytes(), 31'406'250'000);
  EXPECT_EQ(stages[2].total_bytes(), 16'640'625'000);
  EXPECT_EQ(stages[3].total_bytes(), 1'875'000'000);
}

TEST(Estimate, DefaultsPerDtype) {
  EXPECT_EQ(default_optimizer_bytes_per_param(StateDtype::Mixed), 12);
  EXPECT_EQ(default_optimizer_bytes_per_param(StateDtype::Fp32), 8);
  EXPECT_EQ(param_bytes_per_param(StateDtype::Mixed), 2);
  EXPECT_EQ(grad_bytes_per_param(StateDtype::Fp32), 4);
  EXPECT_EQ(parse_state_dtype("mixed"), StateDtype::Mixed);
  EXPECT_EQ(parse_state_dtype("fp32"), StateDtype::Fp32);
  EXPECT_EQ(dtype_name(StateDtype::Fp32), "fp32");
}

TEST(Estimate, FormulasPerStage) {
  const auto stages = estimate_stages(k7bMixed);
  EXPECT_EQ(stages[0].formula, "2Ψ + 2Ψ + 12Ψ");
  EXPECT_EQ(stages[1].formula, "2Ψ + 2Ψ + 12Ψ/N");
  EXPECT_EQ(stages[2].formula, "2Ψ + 2Ψ/N + 12Ψ/N");
  EXPECT_EQ(stages[3].formula, "2Ψ/N + 2Ψ/N + 12Ψ/N");
}

TEST(Estimate, OneGpuMakesEveryStageEqualToDdp) {
  for (const auto dtype : {StateDtype::Mixed, StateDtype::Fp32}) {
    const EstimateConfig config{
        .params = 123'457,
        .world = 1,
        .dtype = dtype,
        .optimizer_bytes_per_param = default_optimizer_bytes_per_param(dtype)};
    const auto stages = estimate_stages(config);
    for (const auto& stage : stages) {
      EXPECT_EQ(stage.params_bytes, stages[0].params_bytes);
      EXPECT_EQ(stage.grads_bytes, stages[0].grads_bytes);
      EXPECT_EQ(stage.optimizer_bytes, stages[0].optimizer_bytes);
    }
    EXPECT_EQ(stages[0].total_bytes(), 123'457 * 16);
  }
}

// K = 16 (say Adam with fp32 master and an extra fp32 buffer) changes the optimizer column only.
TEST(Estimate, OptimizerBytesChangeOnlyTheOptimizerColumn) {
  EstimateConfig config = k7bMixed;
  config.optimizer_bytes_per_param = 16;
  expect_rows(config, {{14'000'000'000, 14'000'000'000, 112'000'000'000, 140'000'000'000},
                       {14'000'000'000, 14'000'000'000, 14'000'000'000, 42'000'000'000},
                       {14'000'000'000, 1'750'000'000, 14'000'000'000, 29'750'000'000},
                       {1'750'000'000, 1'750'000'000, 14'000'000'000, 17'500'000'000}});
}

// Ψ = 10 on N = 3: each rank holds a shard of ceil(10/3) = 4 elements.
TEST(Estimate, ShardsRoundUpWhenNDoesNotDivideParams) {
  EXPECT_EQ(shard_elems(10, 3), 4);
  EXPECT_EQ(shard_elems(9, 3), 3);
  EXPECT_EQ(shard_elems(3, 8), 1);
  EXPECT_EQ(shard_elems(7'000'000'000, 8), 875'000'000);
  const EstimateConfig config{.params = 10, .world = 3};
  expect_rows(config, {{20, 20, 120, 160}, {20, 20, 48, 88}, {20, 8, 48, 76}, {8, 8, 48, 64}});
}

TEST(Estimate, BadConfigsFailWithOneLine) {
  const EstimateConfig bad[] = {
      {.params = 0, .world = 8},
      {.params = -7, .world = 8},
      {.params = 7, .world = 0},
      {.params = 7, .world = -1},
      {.params = 7, .world = 8, .optimizer_bytes_per_param = 0},
      {.params = 7, .world = 8, .optimizer_bytes_per_param = -4},
  };
  for (const auto& config : bad) {
    try {
      estimate_stages(config);
      ADD_FAILURE() << "no error for params " << config.params << " world " << config.world;
    } catch (const Error& error) {
      EXPECT_EQ(std::string(error.what()).find('\n'), std::string::npos) << error.what();
    }
  }
  EXPECT_THROW(parse_state_dtype("fp16"), Error);
  EXPECT_THROW(estimate_stage(k7bMixed, 4), Error);
}

// 1e15 parameters at 16 bytes is 1.6e16 bytes, far inside int64; the limit is exact.
TEST(Estimate, LargeCountsDoNotOverflow) {
  const EstimateConfig quadrillion{.params = 1'000'000'000'000'000, .world = 1};
  EXPECT_EQ(estimate_stage(quadrillion, 0).total_bytes(), 16'000'000'000'000'000);
  EXPECT_EQ(estimate_stage({.params = 1'000'000'000'000'000, .world = 7}, 3).total_bytes(),
            16 * 142'857'142'857'143);
  const std::int64_t most = std::numeric_limits<std::int64_t>::max() / 16;
  EXPECT_EQ(estimate_stage({.params = most, .world = 1}, 0).total_bytes(), most * 16);
  EXPECT_THROW(estimate_stage({.params = most + 1, .world = 1}, 0), Error);
  EXPECT_THROW(estimate_stage({.params = 1'000'000'000'000'000,
                               .world = 1,
                               .optimizer_bytes_per_param = std::numeric_limits<int>::max()},
                              0),
               Error);
}

// Hand counts of out*in + out per Linear layer.
TEST(Estimate, MlpParamCount) {
  // 16 -> 64 -> 64 -> 8: (64*16 + 64) + (64*64 + 64) + (8*64 + 8) = 1088 + 4160 + 520.
  EXPECT_EQ(mlp_param_count({.layers = 3, .width = 64, .in = 16, .classes = 8}), 5768);
  // 4 -> 8 -> 3: (8*4 + 8) + (3*8 + 3) = 40 + 27.
  EXPECT_EQ(mlp_param_count({.layers = 2, .width = 8, .in = 4, .classes = 3}), 67);
  // One layer is in -> classes; the width is not used: 4*5 + 4.
  EXPECT_EQ(mlp_param_count({.layers = 1, .width = 1000, .in = 5, .classes = 4}), 24);
  EXPECT_THROW(mlp_param_count({.layers = 0}), Error);
  EXPECT_THROW(mlp_param_count({.layers = 2, .width = 4'000'000'000}), Error);
}

}  // namespace
}  // namespace zl
