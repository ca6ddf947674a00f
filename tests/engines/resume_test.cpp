// resume_test.cpp — training resumed from a sharded checkpoint: at the same world size bitwise
// what an uninterrupted run computes, whatever stage saved and whatever stage resumes; at another
// world size re-sliced, continuing by global sample index, and close to an uninterrupted run.
#include <gtest/gtest.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <filesystem>
#include <span>
#include <utility>

#include "ckpt/checkpoint.hpp"
#include "ckpt/consolidate.hpp"
#include "ckpt/safetensors.hpp"
#include "run/compare.hpp"
#include "run/train.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;

constexpr EngineKind kStages[] = {EngineKind::Ddp, EngineKind::Zero1, EngineKind::Zero2,
                                  EngineKind::Zero3};

CheckpointPlan save_to(const fs::path& dir, std::int64_t every_steps = 0) {
  CheckpointPlan plan;
  plan.dir = dir;
  plan.every_steps = every_steps;
  return plan;
}

CheckpointPlan resume_from(const fs::path& path) {
  CheckpointPlan plan;
  plan.resume = path;
  return plan;
}

class Resume : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("zerolab_resume_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Each saver trains 2 of the 5 steps and saves; its resumer trains the other 3 from that
  // checkpoint: the final parameters and moments are `uninterrupted`'s, bit for bit.
  void expect_resumes_bitwise(
      std::span<const std::pair<const TrainConfig*, const TrainConfig*>> savers_and_resumers,
      const TrainResult& uninterrupted) {
    int round = 0;
    for (const auto& [saver, resumer] : savers_and_resumers) {
      const fs::path dir = dir_ / std::to_string(round++);
      train(*saver, {}, {}, save_to(dir, 2));
      const auto resumed = train(*resumer, {}, {}, resume_from(dir / "step-00000002"));
      ASSERT_EQ(resumed.steps.size(), 3u);
      EXPECT_FALSE(
          first_difference("params", resumed.final_state.params, uninterrupted.final_state.params));
      EXPECT_FALSE(first_difference("exp_avg", resumed.final_state.exp_avg,
                                    uninterrupted.final_state.exp_avg));
      EXPECT_FALSE(first_difference("exp_avg_sq", resumed.final_state.exp_avg_sq,
                                    uninterrupted.final_state.exp_avg_sq));
    }
  }

  fs::path dir_;
};

TrainConfig config_of(EngineKind engine, int world, std::int64_t micro_batch, std::int64_t steps) {
  TrainConfig config;
  config.engine = engine;
  config.world = world;
  config.micro_batch = micro_batch;
  config.steps = steps;
  config.mlp = {.layers = 3, .width = 13, .in = 6, .classes = 5};
  config.adamw.lr = 0.02;
  config.seed = 9;
  return config;
}

TEST_F(Resume, SameWorldIsBitwiseWhateverStageSavedOrResumes) {
  const auto uninterrupted = train(config_of(EngineKind::Zero1, 3, 4, 7));
  for (const EngineKind saver : {EngineKind::Ddp, EngineKind::Zero3}) {
    const fs::path dir = dir_ / std::string(engine_name(saver));
    train(config_of(saver, 3, 4, 7), {}, {}, save_to(dir, 3));  // saves 3, 6, 7
    for (const EngineKind resumer : kStages) {
      const auto resumed =
          train(config_of(resumer, 3, 4, 7), {}, {}, resume_from(dir / "step-00000003"));
      ASSERT_EQ(resumed.steps.size(), 4u);
      EXPECT_EQ(resumed.steps.front().step, 3);
      const auto diff =
          first_difference("params", resumed.final_state.params, uninterrupted.final_state.params);
      EXPECT_FALSE(diff) << engine_name(saver) << " -> " << engine_name(resumer) << ": " << *diff;
      EXPECT_FALSE(first_difference("exp_avg_sq", resumed.final_state.exp_avg_sq,
                                    uninterrupted.final_state.exp_avg_sq));
      EXPECT_EQ(resumed.steps.back().loss, uninterrupted.steps.back().loss);
      EXPECT_EQ(resumed.steps.back().grad_norm, uninterrupted.steps.back().grad_norm);
    }
  }
}

// Mixed precision, fp16's loss scaler mid-flight (steps skipped, the scale halved and grown),
// accumulation, clipping, buckets and a OneCycle schedule (lr and betas cycling): a checkpoint
// holds the fp32 master, the moments, the update count, the scaler and the schedule, so resuming
// at any stage is still bitwise the uninterrupted run.
TEST_F(Resume, WithEveryFeatureSameWorldIsBitwise) {
  auto config = [](EngineKind engine, DType precision) {
    TrainConfig c = config_of(engine, 3, 2, 9);
    c.features.precision = precision;
    c.features.loss_scale = {.initial_scale_power = 20, .window = 2, .hysteresis = 2,
                             .min_scale = 1.0};
    c.features.grad_accum_steps = 2;
    c.features.grad_clip = 0.3;
    c.features.reduce_bucket_elems = 50;
    c.lr_schedule = {.kind = LrScheduleKind::OneCycle,
                     .min_lr = 1e-3,
                     .one_cycle = {.first_step_size = 3, .decay_step_size = 2,
                                   .decay_lr_rate = 0.3, .decay_mom_rate = 0.01}};
    return c;
  };
  for (const DType precision : {DType::F16, DType::BF16}) {
    const auto uninterrupted = train(config(EngineKind::Zero2, precision));
    if (precision == DType::F16) {  // the scaler is mid-flight at the checkpoint
      EXPECT_TRUE(uninterrupted.steps[0].skipped);
      EXPECT_FALSE(uninterrupted.steps.back().skipped);
    }
    const fs::path dir = dir_ / std::string(dtype_name(precision));
    train(config(EngineKind::Zero3, precision), {}, {}, save_to(dir, 4));
    for (const EngineKind resumer : kStages) {
      const auto resumed =
          train(config(resumer, precision), {}, {}, resume_from(dir / "step-00000004"));
      ASSERT_EQ(resumed.steps.size(), 5u);
      TrainResult tail = uninterrupted;
      tail.steps.erase(tail.steps.begin(), tail.steps.begin() + 4);
      const auto diff = first_difference(resumed, tail);
      EXPECT_FALSE(diff) << dtype_name(precision) << " -> " << engine_name(resumer) << ": "
                         << *diff;
    }
  }
}

// Where the optimizer and ZeRO-3's parameters live is no part of a checkpoint: a run saved with
// its state on the NVMe tier (the optimizer's, streamed or pipelined, or the parameters' too)
// resumes in host memory, on the device or on NVMe again, at any stage, and one saved on the
// device resumes on NVMe, each bitwise the uninterrupted run.
TEST_F(Resume, AcrossTheOptimizersTiersIsBitwise) {
  const fs::path nvme = dir_ / "nvme";
  fs::create_directories(nvme);
  enum class Tier { Device, Host, Nvme, NvmeWithParams, NvmePipelined };
  const auto config = [&](EngineKind engine, Tier tier) {
    TrainConfig c = config_of(engine, 3, 2, 6);
    c.features.precision = DType::BF16;
    c.features.offload_optimizer = tier != Tier::Device;
    if (tier >= Tier::Nvme) c.features.nvme_path = nvme.string();
    c.features.pipeline_read = c.features.pipeline_write = tier == Tier::NvmePipelined;
    if (tier == Tier::NvmeWithParams) {
      c.features.offload_param = true;
      c.features.param_nvme_path = nvme.string();
    }
    return c;
  };
  const auto uninterrupted = train(config(EngineKind::Zero2, Tier::Device));
  TrainResult tail = uninterrupted;
  tail.steps.erase(tail.steps.begin(), tail.steps.begin() + 3);
  for (const Tier saver : {Tier::Nvme, Tier::Device, Tier::NvmeWithParams, Tier::NvmePipelined}) {
    const fs::path dir = dir_ / fmt::format("saved_{}", static_cast<int>(saver));
    train(config(EngineKind::Zero3, saver), {}, {}, save_to(dir, 3));
    for (const Tier resumer :
         {Tier::Device, Tier::Host, Tier::Nvme, Tier::NvmeWithParams, Tier::NvmePipelined}) {
      for (const EngineKind stage : kStages) {
        const auto resumed =
            train(config(stage, resumer), {}, {}, resume_from(dir / "step-00000003"));
        const auto diff = first_difference(resumed, tail);
        EXPECT_FALSE(diff) << static_cast<int>(saver) << " -> " << static_cast<int>(resumer) << " "
                           << engine_name(stage) << ": " << *diff;
      }
    }
  }
  EXPECT_TRUE(fs::is_empty(nvme));
}

// The GPT in bf16: saved by ZeRO-3, resumed bitwise by DDP; consolidated, it is a Hugging Face
// GPT-2 file (names, Conv1D shapes, no separate LM head) that --init starts from, in any stage.
TEST_F(Resume, GptResumesBitwiseAndConsolidatesToHuggingFaceNames) {
  auto config = [](EngineKind engine, std::int64_t steps) {
    TrainConfig c = config_of(engine, 2, 2, steps);
    c.model = ModelKind::Gpt;
    c.gpt = {.n_layer = 2, .n_head = 2, .n_embd = 16, .block_size = 8, .vocab = 24};
    c.features.precision = DType::BF16;
    return c;
  };
  const auto uninterrupted = train(config(EngineKind::Zero1, 5));
  train(config(EngineKind::Zero3, 5), {}, {}, save_to(dir_, 2));
  const auto resumed = train(config(EngineKind::Ddp, 5), {}, {}, resume_from(dir_ / "step-00000002"));
  TrainResult tail = uninterrupted;
  tail.steps.erase(tail.steps.begin(), tail.steps.begin() + 2);
  const auto diff = first_difference(resumed, tail);
  EXPECT_FALSE(diff) << *diff;

  // The shards keep wte as the model holds it, padded to 128 rows; the manifest says how many
  // are padding, and a model padded otherwise would not resume from it.
  const Manifest manifest = read_manifest(dir_);
  EXPECT_EQ(manifest.units[0].params[0].shape, (Shape{128, 16}));
  EXPECT_EQ(manifest.units[0].params[0].pad_rows, 128 - 24);
  EXPECT_EQ(manifest.units[0].params[1].pad_rows, 0);

  // Consolidated, wte has the vocabulary's 24 rows: the padded ones are left out.
  const fs::path out = dir_ / "gpt.safetensors";
  consolidate(dir_, out, /*with_optimizer=*/false);
  const auto tensors = read_safetensors(out);
  EXPECT_EQ(find_tensor(tensors, "wte.weight").shape, (Shape{24, 16}));
  EXPECT_EQ(find_tensor(tensors, "wpe.weight").shape, (Shape{8, 16}));
  EXPECT_EQ(find_tensor(tensors, "h.1.attn.c_attn.weight").shape, (Shape{16, 48}));
  EXPECT_EQ(find_tensor(tensors, "h.0.mlp.c_proj.weight").shape, (Shape{64, 16}));
  EXPECT_EQ(find_tensor(tensors, "ln_f.bias").shape, (Shape{16}));
  EXPECT_EQ(tensors.size(), 2u + 2 * 12 + 2);  // embeddings, 12 per block, ln_f: no lm_head
  const auto wte = to_floats(find_tensor(tensors, "wte.weight"));
  const auto& unit0 = uninterrupted.final_state.params[0];
  EXPECT_TRUE(std::equal(wte.begin(), wte.end(), unit0.begin()));
  // wpe follows wte's padded rows in the unit, and the file's wpe is the unit's.
  const auto wpe = to_floats(find_tensor(tensors, "wpe.weight"));
  EXPECT_TRUE(std::equal(wpe.begin(), wpe.end(), unit0.begin() + 128 * 16));

  TrainConfig from_file = config(EngineKind::Zero2, 1);
  from_file.init_file = out;
  EXPECT_FALSE(first_difference("params", initial_params(from_file),
                                uninterrupted.final_state.params));

  // As a Hugging Face file has them: the "transformer." prefix, lm_head.weight, mask buffers.
  std::vector<TensorRecord> hugging_face;
  for (const auto& tensor : tensors) {
    TensorRecord renamed = tensor;
    renamed.name = "transformer." + tensor.name;
    hugging_face.push_back(std::move(renamed));
  }
  TensorRecord head = find_tensor(tensors, "wte.weight");
  head.name = "lm_head.weight";
  hugging_face.push_back(std::move(head));
  const std::vector<float> mask(64, 1.0f);
  hugging_face.push_back(make_tensor("transformer.h.0.attn.bias", {1, 1, 8, 8}, mask));
  const fs::path hf = dir_ / "hf.safetensors";
  write_safetensors(hf, hugging_face);
  from_file.init_file = hf;
  EXPECT_FALSE(first_difference("params", initial_params(from_file),
                                uninterrupted.final_state.params));
}

// W=4 with 2 rows per rank saves at step 3; W=2 with 4 rows resumes. The global batch of every
// step is the same 8 samples either way, so an uninterrupted W=2 run sees the same data and the
// same mean gradient up to rounding: its sum adds 2 micro-batch means of 4 rows where the first
// 3 steps added 4 means of 2, a different fp32 summation order. The difference stays at the
// level of accumulated fp32 rounding: we allow 1e-5 relative to the largest parameter after 6 Adam
// steps (Adam normalises updates, so an ulp-level gradient difference moves a parameter by at
// most a few ulps of lr per step).
TEST_F(Resume, OtherWorldReslicesAndContinuesByGlobalSample) {
  train(config_of(EngineKind::Zero2, 4, 2, 3), {}, {}, save_to(dir_));
  const auto uninterrupted = train(config_of(EngineKind::Ddp, 2, 4, 6));
  TrainResult first;
  for (const EngineKind resumer : kStages) {
    const auto resumed = train(config_of(resumer, 2, 4, 6), {}, {}, resume_from(dir_));
    if (resumer == EngineKind::Ddp) {
      first = resumed;
      continue;
    }
    EXPECT_FALSE(first_difference(resumed, first)) << engine_name(resumer);  // stages agree exactly
  }
  float largest = 0.0f, worst = 0.0f;
  for (std::size_t u = 0; u < first.final_state.params.size(); ++u) {
    for (std::size_t i = 0; i < first.final_state.params[u].size(); ++i) {
      largest = std::max(largest, std::abs(uninterrupted.final_state.params[u][i]));
      worst = std::max(
          worst, std::abs(first.final_state.params[u][i] - uninterrupted.final_state.params[u][i]));
    }
  }
  std::printf("largest |param| %.6g, largest difference %.3g\n", largest, worst);
  EXPECT_LE(worst, 1e-5f * largest);
  EXPECT_GT(largest, 0.0f);
}

// The schedule is the checkpoint's: a cosine decay that ends with the first run's --steps keeps
// that end, and at another world (re-sliced, batch reshaped) every resumed step's lr is still the
// uninterrupted run's, bit for bit.
TEST_F(Resume, TheScheduleContinuesAtAnyStageAndWorld) {
  auto config = [](EngineKind engine, int world, std::int64_t micro_batch, std::int64_t steps) {
    TrainConfig c = config_of(engine, world, micro_batch, steps);
    c.lr_schedule = {.kind = LrScheduleKind::Cosine, .warmup_steps = 2, .min_lr = 1e-3};
    return c;
  };
  const auto uninterrupted = train(config(EngineKind::Zero1, 4, 2, 8));
  train(config(EngineKind::Zero3, 4, 2, 8), {}, {}, save_to(dir_, 5));  // the decay ends at 8
  // Resumed for longer, the decay still ends at 8: the lr then stays at the floor.
  const auto longer = train(config(EngineKind::Zero2, 4, 2, 10), {}, {},
                            resume_from(dir_ / "step-00000005"));
  ASSERT_EQ(longer.steps.size(), 5u);
  EXPECT_EQ(longer.steps[2].lr, uninterrupted.steps[7].lr);
  EXPECT_DOUBLE_EQ(longer.steps[3].lr, 1e-3);
  EXPECT_DOUBLE_EQ(longer.steps[4].lr, 1e-3);
  for (const auto& [world, micro_batch] : {std::pair{4, 2}, std::pair{2, 4}}) {
    for (const EngineKind resumer : kStages) {
      TrainConfig resumed_config = config(resumer, world, micro_batch, 8);
      const auto resumed = train(resumed_config, {}, {}, resume_from(dir_ / "step-00000005"));
      ASSERT_EQ(resumed.steps.size(), 3u);
      for (std::size_t s = 0; s < 3; ++s) {
        EXPECT_EQ(std::bit_cast<std::uint64_t>(resumed.steps[s].lr),
                  std::bit_cast<std::uint64_t>(uninterrupted.steps[s + 5].lr))
            << engine_name(resumer) << " W=" << world << " step " << s + 5;
      }
      if (world == 4) {
        TrainResult tail = uninterrupted;
        tail.steps.erase(tail.steps.begin(), tail.steps.begin() + 5);
        EXPECT_FALSE(first_difference(resumed, tail)) << engine_name(resumer);
      }
    }
  }
  EXPECT_EQ(uninterrupted.steps.back().lr > 1e-3, true);  // still decaying at the last step
}

// The checkpoint remembers the optimizer's settings, the schedule and the seed: a run that
// resumes with other values fails naming the flag and both values, unless it overrides them.
TEST_F(Resume, OtherOptimizerSettingsAreRefusedUnlessOverridden) {
  train(config_of(EngineKind::Zero1, 2, 2, 3), {}, {}, save_to(dir_));
  auto message = [&](const TrainConfig& c, bool override) {
    CheckpointPlan plan = resume_from(dir_);
    plan.override_settings = override;
    try {
      train(c, {}, {}, plan);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  TrainConfig other_lr = config_of(EngineKind::Zero1, 2, 2, 4);
  other_lr.adamw.lr = 0.05;
  EXPECT_EQ(message(other_lr, false),
            fmt::format("--lr 0.05 contradicts the checkpoint's 0.02 ({}): leave the setting out "
                        "to continue with the checkpoint's, or add --resume-override to change it",
                        dir_.string()));
  EXPECT_EQ(message(other_lr, true), "accepted");
  TrainConfig other_seed = config_of(EngineKind::Zero1, 2, 2, 4);
  other_seed.seed = 10;
  EXPECT_NE(message(other_seed, false).find("--seed 10 contradicts the checkpoint's 9"),
            std::string::npos);
  TrainConfig scheduled = config_of(EngineKind::Zero1, 2, 2, 4);
  scheduled.lr_schedule.warmup_steps = 3;
  EXPECT_NE(message(scheduled, false).find("--lr-schedule (constant: warmup 3) contradicts the "
                                           "checkpoint's (constant)"),
            std::string::npos);
}

// hpZ's primary shards are ZeRO-3's, and so are its checkpoints: hpZ resumes ZeRO-2's, ZeRO-1
// resumes hpZ's, each bitwise the uninterrupted run.
TEST_F(Resume, HpzCheckpointsAreZeroThreesBothWays) {
  TrainConfig hpz = config_of(EngineKind::Zero3, 4, 2, 5);
  hpz.gpus_per_node = 2;
  hpz.features.hpz_partition_ranks = 2;
  TrainConfig plain = hpz;
  plain.features.hpz_partition_ranks = 0;
  const auto uninterrupted = train(plain);
  TrainConfig zero2 = plain;
  zero2.engine = EngineKind::Zero2;
  TrainConfig zero1 = plain;
  zero1.engine = EngineKind::Zero1;
  const std::pair<const TrainConfig*, const TrainConfig*> pairs[] = {{&zero2, &hpz},
                                                                     {&hpz, &zero1}};
  expect_resumes_bitwise(pairs, uninterrupted);
}

// Hybrid sharding writes ZeRO-3's checkpoints (each rank's shard of the world, cut from the unit
// gathered inside its node) and reads them back (its node shard, cut from the unit gathered over
// the world): HSDP resumes ZeRO-2's, ZeRO-1 resumes HSDP's, HSDP its own and ZeRO-2 in shard
// groups ZeRO-1's in shard groups, each bitwise the uninterrupted run, in bf16 with its fp32
// master.
TEST_F(Resume, HsdpCheckpointsAreZeroThreesBothWays) {
  TrainConfig hsdp = config_of(EngineKind::Zero3, 4, 2, 5);
  hsdp.gpus_per_node = 2;
  hsdp.features.precision = DType::BF16;
  hsdp.features.shard_group_ranks = 2;
  TrainConfig plain = hsdp;
  plain.features.shard_group_ranks = 0;
  const auto uninterrupted = train(plain);
  TrainConfig zero2 = plain;
  zero2.engine = EngineKind::Zero2;
  TrainConfig zero1 = plain;
  zero1.engine = EngineKind::Zero1;
  TrainConfig hybrid1 = hsdp;
  hybrid1.engine = EngineKind::Zero1;
  TrainConfig hybrid2 = hsdp;
  hybrid2.engine = EngineKind::Zero2;
  const std::pair<const TrainConfig*, const TrainConfig*> pairs[] = {
      {&zero2, &hsdp}, {&hsdp, &zero1}, {&hsdp, &hsdp}, {&hybrid1, &hybrid2}};
  expect_resumes_bitwise(pairs, uninterrupted);
}

// A finished run resumed (killed after its last save, before its exit) trains nothing and ends
// where it ended, so a restart loop needs no special last round.
TEST_F(Resume, AFinishedRunResumedTrainsNothingAndEndsWhereItEnded) {
  const auto finished = train(config_of(EngineKind::Zero2, 2, 2, 3), {}, {}, save_to(dir_));
  for (const EngineKind resumer : kStages) {
    const auto again = train(config_of(resumer, 2, 2, 3), {}, {}, resume_from(dir_));
    EXPECT_TRUE(again.steps.empty()) << engine_name(resumer);
    EXPECT_FALSE(first_difference("params", again.final_state.params, finished.final_state.params));
    EXPECT_FALSE(first_difference("exp_avg_sq", again.final_state.exp_avg_sq,
                                  finished.final_state.exp_avg_sq));
  }
}

TEST_F(Resume, BadResumesSayWhatToDo) {
  train(config_of(EngineKind::Zero3, 2, 2, 3), {}, {}, save_to(dir_));
  try {
    train(config_of(EngineKind::Zero3, 2, 2, 2), {}, {}, resume_from(dir_));
    FAIL() << "resuming past the run's last step must fail";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what())
                  .find("is at step 3: --steps counts from the run's start, "
                        "so give 3 or more"),
              std::string::npos)
        << error.what();
  }
  TrainConfig other = config_of(EngineKind::Zero3, 2, 2, 6);
  other.mlp.width = 14;
  EXPECT_THROW(train(other, {}, {}, resume_from(dir_)), Error);
  EXPECT_THROW(train(config_of(EngineKind::Reference, 2, 2, 6), {}, {}, resume_from(dir_)), Error);
  EXPECT_THROW(train(config_of(EngineKind::Zero3, 2, 2, 6), {}, {}, resume_from(dir_ / "nowhere")),
               Error);
}

}  // namespace
}  // namespace zl
