// gpu_train_test.cpp — whole training runs on the GPU: every stage with W = 1..4 ranks sharing
// GPU 0 (the sim backend on device memory) against the CPU reference, within tolerance (cuBLAS
// GEMMs and the GPU's LayerNorm, softmax and attention reductions are not the CPU's bits), and
// the nccl backend with one rank against the same run on the sim.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "run/train.hpp"
#include "gpu/gpu_test_support.hpp"

namespace zl {
namespace {

// The `fraction` quantile of |a - b| over every parameter (1.0: the largest), relative to the
// largest |b|.
double relative_difference_quantile(const ModelState& a, const ModelState& b, double fraction) {
  std::vector<double> differences;
  double largest = 0.0;
  for (std::size_t u = 0; u < b.params.size(); ++u) {
    for (std::size_t i = 0; i < b.params[u].size(); ++i) {
      largest = std::max(largest, std::abs(static_cast<double>(b.params[u][i])));
      differences.push_back(std::abs(static_cast<double>(a.params[u][i]) - b.params[u][i]));
    }
  }
  std::sort(differences.begin(), differences.end());
  const auto at = static_cast<std::size_t>(fraction * static_cast<double>(differences.size() - 1));
  return differences[at] / largest;
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

// The GPU's sums are not the CPU's (cuBLAS, the tree-ordered block sums), so its gradients differ
// by rounding: in fp32 each step's loss within 1e-6 and gradient norm within 1e-5 of the CPU's.
// Adam then divides each gradient by its own running size, which turns a rounding difference in
// a gradient near its eps (1e-8) into a large one in the update, up to the +-lr of a flipped
// sign: an element may move by up to 2 lr per step, 3 steps at lr 3e-3 = 1.8e-2 of a largest
// parameter of 1 (the LayerNorm weights), in fp32 as in bf16. (Seen in fp32 at W = 4: 4 of the
// 28 032 parameters, whose first gradient was of eps's order, 8.5e-5 apart.) The bulk of the
// parameters is where a wrong kernel or a lost reduction shows, by the learning rate's order,
// 1e-3 or more: in fp32 99.9% of them lie within 1e-5 of the largest. In bf16 and fp16 the GPU
// also rounds the GEMMs' operands (and the fast attention's tiles) to that format (as autocast
// does), and only the bound holds.
constexpr double kAdamBound = 2 * 3 * 3e-3;
constexpr double kFp32BulkFraction = 0.999;
constexpr double kFp32BulkTolerance = 1e-5;
constexpr double kFp32LossTolerance = 1e-6;
constexpr double kFp32GradNormTolerance = 1e-5;

TEST(GpuTrain, EveryStageOnOneGpuIsTheCpuReferenceWithinTolerance) {
  ZL_REQUIRE_GPU();
  for (const DType precision : {DType::F32, DType::BF16, DType::F16}) {
    for (int world = 1; world <= 4; ++world) {
      TrainConfig config = tiny_gpt(world, precision);
      config.engine = EngineKind::Reference;
      const TrainResult reference = train(config);
      config.accelerator = Accelerator::Cuda;
      for (const EngineKind stage :
           {EngineKind::Ddp, EngineKind::Zero1, EngineKind::Zero2, EngineKind::Zero3}) {
        config.engine = stage;
        const TrainResult gpu = train(config);
        const std::string what = std::string(engine_name(stage)) + " W=" + std::to_string(world) +
                                 " " + std::string(dtype_name(precision));
        EXPECT_LE(relative_difference_quantile(gpu.final_state, reference.final_state, 1.0),
                  kAdamBound)
            << what;
        if (precision == DType::F32) {
          EXPECT_LE(relative_difference_quantile(gpu.final_state, reference.final_state,
                                                 kFp32BulkFraction),
                    kFp32BulkTolerance)
              << what;
          ASSERT_EQ(gpu.steps.size(), reference.steps.size()) << what;
          for (std::size_t s = 0; s < gpu.steps.size(); ++s) {
            EXPECT_NEAR(gpu.steps[s].loss, reference.steps[s].loss,
                        kFp32LossTolerance * reference.steps[s].loss)
                << what << " step " << s;
            EXPECT_NEAR(gpu.steps[s].grad_norm, reference.steps[s].grad_norm,
                        kFp32GradNormTolerance * reference.steps[s].grad_norm)
                << what << " step " << s;
          }
        }
        EXPECT_NEAR(gpu.steps.back().loss, reference.steps.back().loss, 1e-3)
            << engine_name(stage) << " W=" << world;
      }
    }
  }
}

// The ranks of the sim share one GPU, and its collectives reduce in rank order there: the stages
// agree with each other bit for bit, as on the CPU, in fp32 (exact attention) and in bf16 and
// fp16 (the fast attention kernels, whose sums have a fixed order too).
TEST(GpuTrain, StagesOnOneGpuAgreeBitwise) {
  ZL_REQUIRE_GPU();
  for (const DType precision : {DType::F32, DType::BF16, DType::F16}) {
    TrainConfig config = tiny_gpt(3, precision);
    config.accelerator = Accelerator::Cuda;
    config.engine = EngineKind::Ddp;
    const TrainResult ddp = train(config);
    for (const EngineKind stage : {EngineKind::Zero1, EngineKind::Zero2, EngineKind::Zero3}) {
      config.engine = stage;
      EXPECT_EQ(relative_difference_quantile(train(config).final_state, ddp.final_state, 1.0), 0.0)
          << engine_name(stage) << " " << dtype_name(precision);
    }
  }
}

// Inside a step the host waits for the GPU only to read the loss and the gradient norm: the 16-bit
// LM head's chunks add their losses on the device, and token and label checks are read with
// those waits (fp16's overflow check is the norm's). From the second step on (the first grows the
// device's scratch), at every stage, in bf16 and fp16.
TEST(GpuTrain, AStepWaitsOnTheHostForTheLossAndTheNormOnly) {
  ZL_REQUIRE_GPU();
  for (const DType precision : {DType::BF16, DType::F16}) {
    TrainConfig config = tiny_gpt(1, precision);
    config.accelerator = Accelerator::Cuda;
    config.micro_batch = 4 * 512 / config.gpt.block_size;  // four chunks of the LM head's rows
    for (const EngineKind stage :
         {EngineKind::Ddp, EngineKind::Zero1, EngineKind::Zero2, EngineKind::Zero3}) {
      config.engine = stage;
      const TrainResult gpu = train(config);
      for (std::size_t s = 1; s < gpu.steps.size(); ++s) {
        const StepRecord& step = gpu.steps[s];
        EXPECT_EQ(step.host_waits, 2)
            << engine_name(stage) << " " << dtype_name(precision) << " step " << s;
        // the waits' and the last synchronize's blocked time lie within the step's
        EXPECT_GE(step.host_wait_ms, 0.0);
        EXPECT_GE(step.drain_ms, 0.0);
        EXPECT_LE(step.host_wait_ms + step.drain_ms, step.step_ms);
      }
    }
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
  EXPECT_EQ(relative_difference_quantile(nccl.final_state, sim.final_state, 1.0), 0.0);
  ASSERT_EQ(nccl.ranks.size(), 1u);
  EXPECT_EQ(nccl.ranks[0].memory.peak_bytes(MemCategory::Params),
            sim.ranks[0].memory.peak_bytes(MemCategory::Params));
}

}  // namespace
}  // namespace zl
