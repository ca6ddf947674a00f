// accelerator_test.cpp — the engines on the detached CPU device (--accelerator cpu-detached): its
// memory crashes the host on any read or write, so a run that finishes touched device memory only
// through the Device, as a GPU requires, with the simulator's collectives on that memory. Its
// bits and ledgers are the CPU device's, for every stage and feature, and checkpoints move
// between the two.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>
#include <unistd.h>

#include <filesystem>

#include "model/gpt.hpp"
#include "model/gpt_config.hpp"
#include "run/compare.hpp"
#include "support/arbitrary.hpp"
#include "support/small_config.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;

TrainResult run_on(TrainConfig config, Accelerator accelerator, const CheckpointPlan& plan = {}) {
  config.accelerator = accelerator;
  return train(config, {}, {}, plan);
}

// Empty when every rank's memory ledger has the same current and peak bytes per category.
std::optional<std::string> ledger_difference(const TrainResult& a, const TrainResult& b) {
  if (a.ranks.size() != b.ranks.size()) return "different numbers of ranks";
  for (std::size_t r = 0; r < a.ranks.size(); ++r) {
    for (int c = 0; c < kMemCategoryCount; ++c) {
      const auto category = static_cast<MemCategory>(c);
      const MemoryLedger& x = a.ranks[r].memory;
      const MemoryLedger& y = b.ranks[r].memory;
      if (x.peak_bytes(category) != y.peak_bytes(category) ||
          x.current_bytes(category) != y.current_bytes(category)) {
        return fmt::format("rank {} {}: peak {} vs {}", r, mem_category_name(category),
                           x.peak_bytes(category), y.peak_bytes(category));
      }
    }
  }
  return std::nullopt;
}

// Empty when every step of `result` made the host wait `waits` times.
std::optional<std::string> host_wait_difference(const TrainResult& result, std::int64_t waits) {
  for (const StepRecord& step : result.steps) {
    if (step.host_waits != waits) {
      return fmt::format("step {} made the host wait {} times, not {}", step.step, step.host_waits,
                         waits);
    }
  }
  return std::nullopt;
}

// The detached device gives the CPU's bits and ledgers, and each step makes the host wait where
// a GPU would only to read the step's loss (its micro-batches' losses added on the device) and
// the gradient norm: twice, whatever the accumulation, at every stage (the CPU: never).
void check_detached_is_cpu(const TrainConfig& config) {
  const TrainResult cpu = run_on(config, Accelerator::Cpu);
  const TrainResult detached = run_on(config, Accelerator::CpuDetached);
  if (const auto diff = first_difference(detached, cpu)) RC_FAIL(*diff);
  if (const auto diff = ledger_difference(detached, cpu)) RC_FAIL(*diff);
  if (const auto diff = host_wait_difference(cpu, 0)) RC_FAIL("cpu: " + *diff);
  if (const auto diff = host_wait_difference(detached, 2)) {
    RC_FAIL("cpu-detached: " + *diff);
  }
}

RC_GTEST_PROP(Accelerator, prop_every_stage_on_detached_memory_is_bitwise_the_cpu,
              (TrainConfig config)) {
  config.features = *rc::gen_features();
  config.features.offload_optimizer = false;  // the optimizer in host memory: the CPU's only
  config.features.nvme_path.clear();
  config.features.offload_param = false;
  config.features.param_nvme_path.clear();
  config.engine =
      *rc::gen::element(EngineKind::Ddp, EngineKind::Zero1, EngineKind::Zero2, EngineKind::Zero3);
  RC_TAG(engine_name(config.engine));
  check_detached_is_cpu(config);
}

RC_GTEST_PROP(Accelerator, prop_gpt_on_detached_memory_is_bitwise_the_cpu, ()) {
  TrainConfig config = *rc::gen_gpt_config();
  config.features.offload_optimizer = false;
  config.features.nvme_path.clear();
  config.features.offload_param = false;
  config.features.param_nvme_path.clear();
  config.activations.cpu_checkpoints = false;  // host memory, which only the CPU accelerator has
  config.engine =
      *rc::gen::element(EngineKind::Ddp, EngineKind::Zero1, EngineKind::Zero2, EngineKind::Zero3);
  check_detached_is_cpu(config);
}

// The property can fail: another seed on the detached device is a different run.
TEST(Accelerator, DetachedRunsDifferWhenTheirInputsDo) {
  TrainConfig config = small_config();
  config.engine = EngineKind::Zero3;
  const TrainResult cpu = run_on(config, Accelerator::Cpu);
  config.seed = 18;
  EXPECT_TRUE(first_difference(run_on(config, Accelerator::CpuDetached), cpu));
}

// The tiny GPT on `world` ranks for 2 steps of `micro_batch` rows.
TrainConfig tiny_gpt(int world, std::int64_t micro_batch) {
  TrainConfig config;
  config.model = ModelKind::Gpt;
  config.gpt = gpt_preset("tiny");
  config.world = world;
  config.steps = 2;
  config.micro_batch = micro_batch;
  return config;
}

// Each step reports the tokens it trained on over all ranks and micro-batches, and rank 0's
// device memory after it, on every device.
TEST(Accelerator, StepsReportTheirTokensAndRank0sMemory) {
  TrainConfig config = tiny_gpt(3, 2);
  config.features.grad_accum_steps = 2;
  config.engine = EngineKind::Zero2;
  const TrainResult cpu = run_on(config, Accelerator::Cpu);
  const TrainResult detached = run_on(config, Accelerator::CpuDetached);
  for (const TrainResult* result : {&cpu, &detached}) {
    ASSERT_EQ(result->steps.size(), 2u);
    EXPECT_EQ(result->steps[0].tokens, 3 * 2 * 2 * config.gpt.block_size);
    EXPECT_EQ(result->steps[1].memory.peak_bytes(MemCategory::Optimizer),
              result->ranks[0].memory.peak_bytes(MemCategory::Optimizer));
    EXPECT_GT(result->steps[0].memory.peak_bytes(MemCategory::Activations), 0);
  }
}

// GPT-2's 16-bit LM head runs in chunks of token rows; their losses add up on the device, so a
// step at W = 1 makes the host wait twice however many chunks there are (the loss, the norm).
TEST(Accelerator, A16BitGptStepWaitsForTheLossAndTheNormOnly) {
  // four chunks of the LM head's rows in each micro-batch
  TrainConfig config = tiny_gpt(1, 4 * Gpt::kHeadChunkRows / gpt_preset("tiny").block_size);
  config.features.precision = DType::BF16;
  for (const EngineKind engine :
       {EngineKind::Ddp, EngineKind::Zero1, EngineKind::Zero2, EngineKind::Zero3}) {
    config.engine = engine;
    const TrainResult detached = run_on(config, Accelerator::CpuDetached);
    const auto diff = host_wait_difference(detached, 2);
    EXPECT_FALSE(diff) << engine_name(engine) << ": " << *diff;
  }
}

class TempDir {
 public:
  TempDir() : dir_(fs::temp_directory_path() / fmt::format("zl_accel_{}", ::getpid())) {
    fs::remove_all(dir_);
  }
  ~TempDir() { fs::remove_all(dir_); }
  const fs::path& path() const { return dir_; }

 private:
  fs::path dir_;
};

// A checkpoint saved from detached memory resumes on the CPU in another stage as if the run had
// never stopped, and resumes in another world on either device with the same bits.
TEST(Accelerator, CheckpointsMoveBetweenDetachedMemoryAndTheCpu) {
  TempDir dir;
  TrainConfig config = small_config();
  config.steps = 4;
  config.features.precision = DType::BF16;
  config.engine = EngineKind::Zero3;
  CheckpointPlan save;
  save.dir = dir.path();
  save.every_steps = 2;
  run_on(config, Accelerator::CpuDetached, save);
  CheckpointPlan resume;
  resume.resume = dir.path() / "step-00000002";

  TrainConfig other_stage = config;
  other_stage.engine = EngineKind::Zero1;
  const TrainResult straight = run_on(other_stage, Accelerator::Cpu);
  const TrainResult resumed = run_on(other_stage, Accelerator::Cpu, resume);
  EXPECT_FALSE(first_difference("params", resumed.final_state.params,
                                straight.final_state.params));

  TrainConfig other_world = other_stage;
  other_world.world = 2;
  EXPECT_FALSE(first_difference(run_on(other_world, Accelerator::CpuDetached, resume),
                                run_on(other_world, Accelerator::Cpu, resume)));
}

}  // namespace
}  // namespace zl
