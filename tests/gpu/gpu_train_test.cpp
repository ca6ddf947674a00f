// gpu_train_test.cpp — whole training runs on the GPU: every stage with W = 1..4 ranks sharing
// GPU 0 (the sim backend on device memory) against the CPU reference, within tolerance (cuBLAS
// GEMMs and the GPU's LayerNorm, softmax and attention reductions are not the CPU's bits), and
// the nccl backend with one rank against the same run on the sim.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "engines/trainer.hpp"
#include "gpu/gpu_test_support.hpp"

namespace zl {
namespace {

// The largest |a - b| over every parameter, relative to the largest |b|.
double relative_difference(const ModelState& a, const ModelState& b) {
  double largest = 0.0, worst = 0.0;
  for (std::size_t u = 0; u < b.params.size(); ++u) {
    for (std::size_t i = 0; i < b.params[u].size(); ++i) {
      largest = std::max(largest, std::abs(static_cast<double>(b.params[u][i])));
      worst = std::max(worst, std::abs(static_cast<double>(a.params[u][i]) - b.params[u][i]));
    }
  }
  return worst / largest;
}

TrainConfig tiny_gpt(int world, DType precision) {
  TrainConfig config;
  config.model = ModelKind::Gpt;
  config.gpt = gpt_preset("tiny");
  config.world = world;
  config.steps = 3;
  config.micro_batch = 2;
  config.adamw.lr = 3e-3;
  config.seed = 5;
  config.features.precision = precision;
  return config;
}

// After 3 steps at lr 3e-3 the fp32 parameters differ from the CPU's by rounding only, within
// 1e-5 of the largest parameter; a wrong kernel or a lost reduction moves them by the learning
// rate's order, 1e-3 or more. In bf16 the GPU also rounds the GEMMs' operands to bf16 (as
// autocast does) and Adam's early updates are about +-lr whatever a gradient's size, so an
// element whose tiny gradient changes sign moves by up to 2 lr per step: 3 steps, 1.8e-2 of a
// largest parameter of 1 (the LayerNorm weights), is the bound.
constexpr double kFp32Tolerance = 1e-5;
constexpr double kBf16Tolerance = 2e-2;

TEST(GpuTrain, EveryStageOnOneGpuIsTheCpuReferenceWithinTolerance) {
  ZL_REQUIRE_GPU();
  for (const DType precision : {DType::F32, DType::BF16}) {
    for (int world = 1; world <= 4; ++world) {
      TrainConfig config = tiny_gpt(world, precision);
      config.engine = EngineKind::Reference;
      const TrainResult reference = train(config);
      config.accelerator = Accelerator::Cuda;
      for (const EngineKind stage :
           {EngineKind::Ddp, EngineKind::Zero1, EngineKind::Zero2, EngineKind::Zero3}) {
        config.engine = stage;
        const TrainResult gpu = train(config);
        const double diff = relative_difference(gpu.final_state, reference.final_state);
        EXPECT_LE(diff, precision == DType::F32 ? kFp32Tolerance : kBf16Tolerance)
            << engine_name(stage) << " W=" << world << " " << dtype_name(precision);
        EXPECT_NEAR(gpu.steps.back().loss, reference.steps.back().loss, 1e-3)
            << engine_name(stage) << " W=" << world;
      }
    }
  }
}

// The ranks of the sim share one GPU, and its collectives reduce in rank order there: the stages
// agree with each other bit for bit, as on the CPU.
TEST(GpuTrain, StagesOnOneGpuAgreeBitwise) {
  ZL_REQUIRE_GPU();
  TrainConfig config = tiny_gpt(3, DType::F32);
  config.accelerator = Accelerator::Cuda;
  config.engine = EngineKind::Ddp;
  const TrainResult ddp = train(config);
  for (const EngineKind stage : {EngineKind::Zero1, EngineKind::Zero2, EngineKind::Zero3}) {
    config.engine = stage;
    EXPECT_EQ(relative_difference(train(config).final_state, ddp.final_state), 0.0)
        << engine_name(stage);
  }
}

TEST(GpuTrain, NcclWithOneRankIsTheSimOnTheGpu) {
  ZL_REQUIRE_GPU();
  TrainConfig config = tiny_gpt(1, DType::BF16);
  config.accelerator = Accelerator::Cuda;
  config.engine = EngineKind::Zero2;
  const TrainResult sim = train(config);
  config.backend = Backend::Nccl;
  const TrainResult nccl = train(config);
  ASSERT_TRUE(nccl.has_results);
  EXPECT_EQ(relative_difference(nccl.final_state, sim.final_state), 0.0);
  ASSERT_EQ(nccl.ranks.size(), 1u);
  EXPECT_EQ(nccl.ranks[0].memory.peak_bytes(MemCategory::Params),
            sim.ranks[0].memory.peak_bytes(MemCategory::Params));
}

}  // namespace
}  // namespace zl
