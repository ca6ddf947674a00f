// ds_config_test.cpp — `zerolab train --config ds.json`: every DeepSpeed key lands in its
// TrainConfig field, unknown keys warn, wrong types and values fail in one exact line, malformed
// JSON names its line and column and nests at most 64 levels. The files on disk and the binary:
// ds_config_files_test.cpp.
#include "cli/ds_config.hpp"

#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace zl {
namespace {

// Parses `text` as "ds.json" and applies it to a default TrainConfig.
struct Applied {
  DsConfig ds;
  TrainConfig config;
  std::int64_t steps_per_print = 1;
  std::vector<std::string> warnings;
};

Applied apply(std::string_view text) {
  Applied out;
  out.ds = parse_ds_config(text, "ds.json", out.warnings);
  apply_ds_config(out.ds, out.config, out.steps_per_print);
  return out;
}

// The message parse_ds_config throws for `text` ("" if it does not throw).
std::string error_of(std::string_view text) {
  std::vector<std::string> warnings;
  try {
    parse_ds_config(text, "ds.json", warnings);
  } catch (const Error& error) {
    return error.what();
  }
  return "";
}

TEST(DsConfig, EveryKeyMapsToItsField) {
  const Applied a = apply(R"({
    "train_batch_size": 48,
    "train_micro_batch_size_per_gpu": 6,
    "gradient_accumulation_steps": 8,
    "gradient_clipping": 0.5,
    "steps_per_print": 7,
    "fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 9, "loss_scale_window": 300,
             "hysteresis": 3, "min_loss_scale": 0.25},
    "zero_optimization": {"stage": 3, "reduce_bucket_size": 5e8, "allgather_bucket_size": 123,
                          "stage3_prefetch_bucket_size": 0, "stage3_param_persistence_threshold": 1e4,
                          "overlap_comm": true, "contiguous_gradients": false,
                          "zero_hpz_partition_size": 8, "offload_optimizer": {"device": "none"}},
    "optimizer": {"type": "AdamW",
                  "params": {"lr": 0.002, "betas": [0.8, 0.95], "eps": 1e-6, "weight_decay": 0.1}}
  })");
  EXPECT_TRUE(a.warnings.empty());
  const TrainingFeatures& f = a.config.features;
  EXPECT_EQ(a.ds.train_batch_size, 48);
  EXPECT_EQ(a.config.micro_batch, 6);
  EXPECT_EQ(f.grad_accum_steps, 8);
  EXPECT_EQ(f.grad_clip, 0.5);
  EXPECT_EQ(a.steps_per_print, 7);
  EXPECT_EQ(f.precision, DType::F16);
  EXPECT_EQ(f.loss_scale.initial_scale_power, 9);
  EXPECT_EQ(f.loss_scale.window, 300);
  EXPECT_EQ(f.loss_scale.hysteresis, 3);
  EXPECT_EQ(f.loss_scale.min_scale, 0.25);
  EXPECT_EQ(a.config.engine, EngineKind::Zero3);
  EXPECT_EQ(f.reduce_bucket_elems, 500'000'000);
  EXPECT_EQ(f.allgather_bucket_elems, 123);
  EXPECT_EQ(f.prefetch_bucket_elems, 0);
  EXPECT_EQ(f.persistence_threshold_elems, 10'000);
  EXPECT_EQ(a.ds.overlap_comm, true);
  EXPECT_TRUE(f.overlap_comm);
  EXPECT_EQ(a.ds.contiguous_gradients, false);
  EXPECT_EQ(f.hpz_partition_ranks, 8);
  // MiCS's shard group is hybrid sharding's (-1, DeepSpeed's default, is off; 0 is refused)
  EXPECT_EQ(
      apply(R"({"zero_optimization": {"mics_shard_size": 4}})").config.features.shard_group_ranks,
      4);
  EXPECT_EQ(
      apply(R"({"zero_optimization": {"mics_shard_size": -1}})").config.features.shard_group_ranks,
      0);
  EXPECT_EQ(error_of(R"({"zero_optimization": {"mics_shard_size": 0}})"),
            "ds.json: zero_optimization.mics_shard_size is 0: use -1 (off) or the GPUs of a node");
  EXPECT_EQ(a.ds.offload_optimizer_device, "none");
  EXPECT_FALSE(f.offload_optimizer);
  EXPECT_TRUE(apply(R"({"zero_optimization": {"offload_optimizer": {"device": "cpu"}}})")
                  .config.features.offload_optimizer);
  EXPECT_EQ(a.config.adamw.lr, 0.002);
  EXPECT_EQ(a.config.adamw.beta1, 0.8);
  EXPECT_EQ(a.config.adamw.beta2, 0.95);
  EXPECT_EQ(a.config.adamw.eps, 1e-6);
  EXPECT_EQ(a.config.adamw.weight_decay, 0.1);
  EXPECT_EQ(apply(R"({"bf16": {"enabled": true}})").config.features.precision, DType::BF16);
  EXPECT_EQ(apply(R"({"bf16": {"enabled": false}, "fp16": {"enabled": false}})")
                .config.features.precision,
            DType::F32);
  for (const int stage : {0, 1, 2, 3}) {
    EXPECT_EQ(
        apply(fmt::format(R"({{"zero_optimization": {{"stage": {}}}}})", stage)).config.engine,
        engine_of_stage(stage));
  }
}

// A key the file leaves out leaves its field as it was (zerolab's defaults are DeepSpeed's).
// DeepSpeed's section turns on checkpointing of every block (a DeepSpeed model calls
// deepspeed.checkpointing per block); its buffer keys are accepted, partitioning is a warning.
TEST(DsConfig, ActivationCheckpointingSectionCheckpointsEveryBlock) {
  const Applied plain = apply(R"({"activation_checkpointing": {}})");
  EXPECT_EQ(plain.config.activations, ActivationPolicy{.recompute = Recompute::Full});
  EXPECT_TRUE(plain.warnings.empty());
  const Applied full = apply(R"({"activation_checkpointing": {"partition_activations": true,
      "cpu_checkpointing": false, "contiguous_memory_optimization": true,
      "number_checkpoints": null, "synchronize_checkpoint_boundary": false, "profile": false}})");
  EXPECT_EQ(full.config.activations, ActivationPolicy{.recompute = Recompute::Full});
  ASSERT_EQ(full.warnings.size(), 1u);
  EXPECT_EQ(full.warnings[0],
            "ds.json: activation_checkpointing.partition_activations is true: zerolab has no "
            "model parallelism to partition across; ignored");
  EXPECT_EQ(apply("{}").config.activations, ActivationPolicy{});
  EXPECT_EQ(
      apply(R"({"activation_checkpointing": {"cpu_checkpointing": true}})").config.activations,
      (ActivationPolicy{.recompute = Recompute::Full, .cpu_checkpoints = true}));
}

TEST(DsConfig, AbsentKeysLeaveTheConfigAlone) {
  const Applied a = apply("{}");
  const TrainConfig defaults;
  EXPECT_EQ(a.config.micro_batch, defaults.micro_batch);
  EXPECT_EQ(a.config.engine, defaults.engine);
  EXPECT_EQ(a.config.adamw.weight_decay, defaults.adamw.weight_decay);
  EXPECT_EQ(a.config.features.precision, DType::F32);
  EXPECT_EQ(a.config.features.grad_accum_steps, 1);
  EXPECT_EQ(a.config.features.reduce_bucket_elems, defaults.features.reduce_bucket_elems);
  EXPECT_EQ(a.steps_per_print, 1);
  EXPECT_FALSE(a.ds.precision.has_value());
  EXPECT_FALSE(a.ds.adamw.has_value());
}

// An optimizer section takes DeepSpeed's defaults for the params it leaves out (FusedAdam's
// weight_decay is 0); "Adam" is AdamW unless adam_w_mode is false; the type ignores case.
TEST(DsConfig, OptimizerIsAdamWWithDeepSpeedDefaults) {
  for (const char* type : {"AdamW", "adam", "ADAMW"}) {
    const Applied a = apply(fmt::format(R"({{"optimizer": {{"type": "{}"}}}})", type));
    EXPECT_EQ(a.config.adamw.lr, 1e-3) << type;
    EXPECT_EQ(a.config.adamw.beta1, 0.9);
    EXPECT_EQ(a.config.adamw.beta2, 0.999);
    EXPECT_EQ(a.config.adamw.eps, 1e-8);
    EXPECT_EQ(a.config.adamw.weight_decay, 0.0);
  }
  EXPECT_EQ(apply(R"({"optimizer": {"type": "Adam", "params": {"adam_w_mode": true, "lr": 0.5}}})")
                .config.adamw.lr,
            0.5);
}

// "DeepSpeed_Adam" (DeepSpeedExamples' Megatron offload configs) is DeepSpeed's older name of
// DeepSpeedCPUAdam, which DeepSpeed runs as AdamW: DeepSpeed's defaults, any case; adam_w_mode
// false is refused as for Adam.
TEST(DsConfig, DeepSpeedAdamIsAdamW) {
  for (const char* type : {"DeepSpeed_Adam", "deepspeed_adam", "DEEPSPEED_ADAM"}) {
    const Applied a = apply(fmt::format(
        R"({{"optimizer": {{"type": "{}", "params": {{"lr": 0.00015, "betas": [0.9, 0.95]}}}}}})",
        type));
    EXPECT_TRUE(a.warnings.empty()) << type;
    EXPECT_EQ(a.config.adamw.lr, 0.00015) << type;
    EXPECT_EQ(a.config.adamw.beta1, 0.9);
    EXPECT_EQ(a.config.adamw.beta2, 0.95);
    EXPECT_EQ(a.config.adamw.eps, 1e-8);
    EXPECT_EQ(a.config.adamw.weight_decay, 0.0);
  }
  EXPECT_EQ(
      error_of(R"({"optimizer": {"type": "DeepSpeed_Adam", "params": {"adam_w_mode": false}}})"),
      "ds.json: optimizer.params.adam_w_mode is false: zerolab trains with AdamW only: use true "
      "or leave it out");
  EXPECT_EQ(
      error_of(R"({"optimizer": {"type": "DeepSpeedAdam"}})"),
      R"(ds.json: optimizer.type is "DeepSpeedAdam": use AdamW, or Adam with adam_w_mode true)");
}

// scheduler: each of DeepSpeed's four schedules with its params and defaults; the peak lr
// (warmup_max_lr, cycle_max_lr) replaces the optimizer's, as DeepSpeed's scheduler does; "auto"
// resolves to the run's values, saying so.
TEST(DsConfig, SchedulerSectionMapsToTheSchedule) {
  Applied a = apply(R"({"optimizer": {"type": "AdamW", "params": {"lr": 0.5}},
    "scheduler": {"type": "WarmupDecayLR", "params": {"warmup_min_lr": 1e-5,
      "warmup_max_lr": 0.02, "warmup_num_steps": 7, "total_num_steps": 90, "warmup_type": "linear"}}})");
  EXPECT_EQ(a.config.adamw.lr, 0.02);
  EXPECT_EQ(a.config.lr_schedule, (LrSchedule{.kind = LrScheduleKind::WarmupDecayLR,
                                              .warmup_steps = 7,
                                              .total_steps = 90,
                                              .min_lr = 1e-5,
                                              .warmup_shape = WarmupShape::Linear}));
  EXPECT_TRUE(a.warnings.empty());

  a = apply(R"({"scheduler": {"type": "WarmupLR"}})");  // DeepSpeed's defaults
  EXPECT_EQ(a.config.lr_schedule,
            (LrSchedule{.kind = LrScheduleKind::WarmupLR, .warmup_steps = 1000}));
  EXPECT_EQ(a.config.adamw.lr, 1e-3);  // no warmup_max_lr: the optimizer's lr is the peak

  a = apply(R"({"scheduler": {"type": "WarmupCosineLR", "params": {"total_num_steps": "auto",
    "warmup_num_steps": 10, "warmup_min_ratio": 0.1, "cos_min_ratio": 0.01}}})");
  EXPECT_EQ(a.config.lr_schedule, (LrSchedule{.kind = LrScheduleKind::WarmupCosineLR,
                                              .warmup_steps = 10,
                                              .total_steps = 0,
                                              .warmup_min_ratio = 0.1,
                                              .cos_min_ratio = 0.01}));
  EXPECT_TRUE(a.warnings.empty());
  EXPECT_EQ(a.ds.auto_keys, std::vector<std::string>{"scheduler.params.total_num_steps"});
  a.config.steps = 40;
  EXPECT_EQ(auto_resolutions(a.ds, a.config, 1),
            std::vector<std::string>{"ds.json: scheduler.params.total_num_steps is \"auto\": 40 "
                                     "(--decay-steps, else --steps)"});

  a = apply(R"({"scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 1e-4,
    "cycle_max_lr": 1e-2, "cycle_first_step_size": 30, "cycle_second_stair_count": null,
    "decay_step_size": 5, "decay_lr_rate": 0.1, "cycle_momentum": false}}})");
  EXPECT_EQ(a.config.adamw.lr, 1e-2);
  EXPECT_EQ(a.config.lr_schedule.min_lr, 1e-4);
  EXPECT_EQ(a.config.lr_schedule.one_cycle, (OneCycleParams{.first_step_size = 30,
                                                            .decay_step_size = 5,
                                                            .decay_lr_rate = 0.1,
                                                            .cycle_momentum = false}));
}

TEST(DsConfig, SchedulerProblemsFailNamingTheKey) {
  EXPECT_EQ(error_of(R"({"scheduler": {"type": "LRRangeTest"}})"),
            "ds.json: scheduler.type is \"LRRangeTest\": DeepSpeed's LR range test is not "
            "implemented in zerolab: use WarmupLR, WarmupDecayLR, WarmupCosineLR or OneCycle");
  EXPECT_EQ(error_of(R"({"scheduler": {"type": "CosineAnnealingLR"}})"),
            "ds.json: scheduler.type is \"CosineAnnealingLR\": use WarmupLR, WarmupDecayLR, "
            "WarmupCosineLR or OneCycle");
  EXPECT_EQ(error_of(R"({"scheduler": {"params": {}}})"),
            "ds.json: scheduler.type is missing: use WarmupLR, WarmupDecayLR, WarmupCosineLR or "
            "OneCycle");
  EXPECT_EQ(error_of(R"({"scheduler": {"type": "WarmupDecayLR"}})"),
            "ds.json: scheduler.params.total_num_steps is missing: WarmupDecayLR needs the update "
            "its decay ends at (or \"auto\": the run's --steps)");
  EXPECT_EQ(error_of(R"({"scheduler": {"type": "OneCycle", "params": {"cycle_max_lr": 1}}})"),
            "ds.json: scheduler.params needs cycle_min_lr and cycle_max_lr: OneCycle has no "
            "defaults for them");
  EXPECT_EQ(error_of(R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_type": "exp"}}})"),
            "ds.json: scheduler.params.warmup_type is \"exp\": use \"log\" or \"linear\"");
  EXPECT_EQ(error_of(R"({"scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": -1}}})"),
            "ds.json: scheduler.params.warmup_num_steps is -1: use 0 or more updates");
  EXPECT_EQ(
      error_of(
          R"({"scheduler": {"type": "OneCycle", "params": {"cycle_min_lr": 0, "cycle_max_lr": 1, "cycle_max_mom": 1.0}}})"),
      "ds.json: scheduler.params.cycle_max_mom is 1.0: use a beta1 in [0, 1)");
}

// Keys zerolab does not read are sorted: DeepSpeed keys it does not implement say what zerolab
// does instead; unknown keys name the nearest known key when one is a likely typo.
TEST(DsConfig, UnreadKeysWarnWithTheirFullPathAndKind) {
  const Applied a = apply(R"({
    "zero_optimization": {"stage": 2, "foo": 1, "overlap_com": true,
                          "offload_optimizer": {"device": "none", "pin_memory": true}},
    "scheduler": {"type": "WarmupLR", "params": {"warmup_num_steps": 5, "gamma": 2}},
    "fp16": {"auto_cast": false},
    "optimizer": {"type": "AdamW", "params": {"torch_adam": true}}
  })");
  EXPECT_EQ(a.warnings,
            (std::vector<std::string>{
                "ds.json: fp16.auto_cast is a DeepSpeed key zerolab does not implement (inputs "
                "are cast by the model's own rules); ignored",
                "ds.json: optimizer.params.torch_adam is a DeepSpeed key zerolab does not "
                "implement (zerolab's fused AdamW is bitwise torch's); ignored",
                "ds.json: unknown key scheduler.params.gamma ignored",
                "ds.json: unknown key zero_optimization.foo ignored",
                "ds.json: zero_optimization.offload_optimizer.pin_memory is a DeepSpeed key "
                "zerolab does not implement (host memory is not pinned); ignored",
                "ds.json: unknown key zero_optimization.overlap_com ignored: did you mean "
                "zero_optimization.overlap_comm?",
            }));
  EXPECT_EQ(a.config.engine, EngineKind::Zero2);  // the known keys beside them still apply
  std::vector<std::string> warnings;
  parse_ds_config("{\"a\\nb\": 1}", "ds.json", warnings);
  EXPECT_EQ(warnings, std::vector<std::string>{"ds.json: unknown key a\\nb ignored"});  // one line
}

struct BadConfig {
  std::string text;
  std::string message;
};

// A key zerolab does not implement whose value would change the run is an error, never a silent
// no-op; at the value that changes nothing it is a warning like the others.
TEST(DsConfig, UnimplementedKeysThatWouldChangeTheRunAreErrors) {
  EXPECT_EQ(error_of(R"({"prescale_gradients": true})"),
            "ds.json: prescale_gradients is true: zerolab does not implement it (gradients are "
            "summed, then divided by the world once) and this value would change the run: use "
            "false or leave it out");
  EXPECT_EQ(error_of(R"({"optimizer": {"type": "AdamW", "params": {"amsgrad": true}}})"),
            "ds.json: optimizer.params.amsgrad is true: zerolab does not implement it (AdamW "
            "without amsgrad) and this value would change the run: use false or leave it out");
  EXPECT_EQ(error_of(R"({"amp": {"enabled": false}, "prescale_gradients": false,
                         "gradient_predivide_factor": 1})"),
            "");
}

// "auto" keeps the run's own value: nothing is read from the key, and once the flags are
// applied each one says what it became.
TEST(DsConfig, AutoValuesResolveToTheRunsOwnValues) {
  Applied a = apply(R"({"train_micro_batch_size_per_gpu": "auto", "train_batch_size": "auto",
    "gradient_accumulation_steps": "auto", "optimizer": {"type": "AdamW", "params": {"lr": "auto",
    "weight_decay": 0.1}}, "bf16": {"enabled": "auto"}})");
  EXPECT_TRUE(a.warnings.empty());
  a.config.micro_batch = 8;
  a.config.world = 2;
  EXPECT_EQ(a.config.adamw.lr, 1e-3);  // DeepSpeed's default, as with the key left out
  EXPECT_EQ(a.config.adamw.weight_decay, 0.1);
  EXPECT_EQ(auto_resolutions(a.ds, a.config, 1),
            (std::vector<std::string>{
                "ds.json: bf16.enabled is \"auto\": false (--bf16)",
                "ds.json: gradient_accumulation_steps is \"auto\": 1 (--grad-accum)",
                "ds.json: optimizer.params.lr is \"auto\": 0.001 (--lr)",
                "ds.json: train_batch_size is \"auto\": micro-batch * accumulation * world = 16 "
                "(not checked)",
                "ds.json: train_micro_batch_size_per_gpu is \"auto\": 8 (--micro-batch)"}));
  EXPECT_NO_THROW(check_train_batch_size(a.ds, a.config));
}

// Every problem of a file is reported at once, one line each, in the file's key order.
TEST(DsConfig, AllProblemsOfAFileAreReportedTogether) {
  EXPECT_EQ(error_of(R"({"zero_optimization": {"stage": 5, "overlap_comm": 1},
                         "gradient_clipping": -1, "optimizer": {"type": "Lamb"}})"),
            "ds.json: gradient_clipping is -1: use a norm >= 0 (0: no clipping)\n"
            "ds.json: optimizer.type is \"Lamb\": use AdamW, or Adam with adam_w_mode true\n"
            "ds.json: zero_optimization.overlap_comm is 1: use true or false\n"
            "ds.json: zero_optimization.stage is 5: use 0, 1, 2 or 3");
}

// DeepSpeed's older spellings still work: cpu_offload for offload_optimizer.device "cpu",
// cpu_offload_params for offload_param.device "cpu", the bfloat16 section for bf16; a static
// fp16.loss_scale is DeepSpeed's static scaling; reduce_bucket_size 0 reduces each unit whole.
TEST(DsConfig, OlderSpellingsStaticScaleAndUnboundedBuckets) {
  Applied a = apply(R"({"zero_optimization": {"stage": 2, "cpu_offload": true,
    "reduce_bucket_size": 0}, "bfloat16": {"enabled": true}})");
  EXPECT_TRUE(a.config.features.offload_optimizer);
  EXPECT_EQ(a.config.features.precision, DType::BF16);
  EXPECT_EQ(a.config.features.reduce_bucket_elems, std::numeric_limits<std::int64_t>::max());
  a = apply(R"({"fp16": {"enabled": true, "loss_scale": 128}})");
  EXPECT_EQ(a.config.features.loss_scale.static_scale, 128.0);
  a = apply(R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu"}}})");
  EXPECT_TRUE(a.config.features.offload_param);
  a = apply(R"({"zero_optimization": {"stage": 3, "cpu_offload_params": true}})");
  EXPECT_TRUE(a.config.features.offload_param);
  EXPECT_TRUE(a.warnings.empty());
}

// offload_param's swap buffers and max_in_cpu: DeepSpeed's defaults (5 buffers of up to 1e8
// elements, the first 1e9 elements kept in host memory) where a config on nvme leaves them out,
// its own values where it gives them; on cpu max_in_cpu does nothing, as in DeepSpeed.
TEST(DsConfig, OffloadParamsBuffersAndMaxInCpuAreDeepSpeeds) {
  constexpr std::string_view nvme =
      R"({"zero_optimization": {"stage": 3, "offload_optimizer": {"device": "cpu"},
          "offload_param": {"device": "nvme", "nvme_path": "/tmp"%s}}})";
  const auto with = [&](std::string_view keys) {
    std::string text(nvme);
    return apply(text.replace(text.find("%s"), 2, keys));
  };
  Applied a = with("");
  EXPECT_EQ(a.config.features.param_nvme_path, "/tmp");
  EXPECT_EQ(a.config.features.param_buffer_count, 5);
  EXPECT_EQ(a.config.features.param_buffer_elems, 100'000'000);
  EXPECT_EQ(a.config.features.param_max_in_cpu_elems, 1'000'000'000);
  a = with(R"(, "buffer_count": 2, "buffer_size": 4096, "max_in_cpu": 0)");
  EXPECT_EQ(a.config.features.param_buffer_count, 2);
  EXPECT_EQ(a.config.features.param_buffer_elems, 4096);
  EXPECT_EQ(a.config.features.param_max_in_cpu_elems, 0);
  EXPECT_TRUE(a.warnings.empty());
  a = apply(R"({"zero_optimization": {"stage": 3, "offload_param": {"device": "cpu",
      "max_in_cpu": 5e8}}})");
  EXPECT_TRUE(a.config.features.offload_param);
  EXPECT_TRUE(a.config.features.param_nvme_path.empty());
  EXPECT_TRUE(TrainingFeatures{}.param_max_in_cpu_elems == 0) << "the flags' default: on disk";
}

TEST(DsConfig, WrongTypesAndValuesFailInOneLineNamingTheKey) {
  const BadConfig cases[] = {
      {R"({"zero_optimization": {"stage": 5}})",
       "ds.json: zero_optimization.stage is 5: use 0, 1, 2 or 3"},
      {R"({"zero_optimization": {"stage": "3"}})",
       R"(ds.json: zero_optimization.stage is "3": use 0, 1, 2 or 3)"},
      {R"({"zero_optimization": 3})", "ds.json: zero_optimization is 3: use an object"},
      {R"({"train_micro_batch_size_per_gpu": 1.5})",
       "ds.json: train_micro_batch_size_per_gpu is 1.5: use 1 or more samples per rank"},
      {R"({"train_micro_batch_size_per_gpu": 0})",
       "ds.json: train_micro_batch_size_per_gpu is 0: use 1 or more samples per rank"},
      {R"({"gradient_accumulation_steps": -2})",
       "ds.json: gradient_accumulation_steps is -2: use 1 or more micro-batches per step"},
      {R"({"gradient_clipping": -1.0})",
       "ds.json: gradient_clipping is -1.0: use a norm >= 0 (0: no clipping)"},
      {R"({"gradient_clipping": null})",
       "ds.json: gradient_clipping is null: use a norm >= 0 (0: no clipping)"},
      {R"({"steps_per_print": 0})", "ds.json: steps_per_print is 0: use 1 or more steps"},
      {R"({"bf16": true})", "ds.json: bf16 is true: use an object"},
      {R"({"bf16": {"enabled": "yes"}})", R"(ds.json: bf16.enabled is "yes": use true or false)"},
      {R"({"fp16": {"enabled": true, "loss_scale": -1}})",
       "ds.json: fp16.loss_scale is -1: use 0 (dynamic scaling) or a static scale > 0"},
      {R"({"fp16": {"initial_scale_power": 64}})",
       "ds.json: fp16.initial_scale_power is 64: use 0 to 63"},
      {R"({"fp16": {"hysteresis": 0}})", "ds.json: fp16.hysteresis is 0: use 1 or more overflows"},
      {R"({"fp16": {"min_loss_scale": 0}})", "ds.json: fp16.min_loss_scale is 0: use a number > 0"},
      {R"({"bf16": {"enabled": true}, "fp16": {"enabled": true}})",
       "ds.json: bf16.enabled and fp16.enabled are both true: enable one of them"},
      {R"({"zero_optimization": {"reduce_bucket_size": 1e19}})",
       "ds.json: zero_optimization.reduce_bucket_size is 1e+19: use 0 (no limit) or more elements"},
      {R"({"zero_optimization": {"allgather_bucket_size": 18446744073709551615}})",
       "ds.json: zero_optimization.allgather_bucket_size is 18446744073709551615: use 1 or more "
       "elements"},
      {R"({"zero_optimization": {"stage3_prefetch_bucket_size": -1}})",
       "ds.json: zero_optimization.stage3_prefetch_bucket_size is -1: use 0 (no prefetch) or more "
       "elements"},
      {R"({"zero_optimization": {"overlap_comm": 1}})",
       "ds.json: zero_optimization.overlap_comm is 1: use true or false"},
      {R"({"zero_optimization": {"offload_optimizer": {"device": "nvme"}}})",
       "ds.json: zero_optimization.offload_optimizer.device is nvme but it has no nvme_path: add "
       "the folder for its swap files"},
      {R"({"zero_optimization": {"offload_optimizer": {"device": "disk"}}})",
       R"(ds.json: zero_optimization.offload_optimizer.device is "disk": use none, cpu or nvme)"},
      {R"({"zero_optimization": {"offload_optimizer": {"device": "nvme", "nvme_path": 1}}})",
       "ds.json: zero_optimization.offload_optimizer.nvme_path is 1: use the path of a folder for "
       "the swap files"},
      {R"({"zero_optimization": {"offload_param": {"buffer_count": 0}}})",
       "ds.json: zero_optimization.offload_param.buffer_count is 0: use 1 to 1024 swap buffers"},
      {R"({"zero_optimization": {"offload_param": {"buffer_size": 1.5}}})",
       "ds.json: zero_optimization.offload_param.buffer_size is 1.5: use 1 or more elements"},
      {R"({"zero_optimization": {"offload_param": {"max_in_cpu": -1}}})",
       "ds.json: zero_optimization.offload_param.max_in_cpu is -1: use 0 (every shard on disk) or "
       "more elements"},
      {R"({"optimizer": {"type": "SGD"}})",
       R"(ds.json: optimizer.type is "SGD": use AdamW, or Adam with adam_w_mode true)"},
      {R"({"optimizer": {"params": {"lr": 0.1}}})",
       "ds.json: optimizer.type is missing: use AdamW"},
      {R"({"optimizer": {"type": "Adam", "params": {"adam_w_mode": false}}})",
       "ds.json: optimizer.params.adam_w_mode is false: zerolab trains with AdamW only: use true "
       "or leave it out"},
      {R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.9]}}})",
       "ds.json: optimizer.params.betas is [0.9]: use [beta1, beta2], each in [0, 1)"},
      {R"({"optimizer": {"type": "AdamW", "params": {"betas": [0.9, 1.0]}}})",
       "ds.json: optimizer.params.betas is [0.9,1.0]: use [beta1, beta2], each in [0, 1)"},
      {R"({"optimizer": {"type": "AdamW", "params": {"lr": 0}}})",
       "ds.json: optimizer.params.lr is 0: use a number > 0"},
      {R"({"optimizer": {"type": "AdamW", "params": {"weight_decay": -0.1}}})",
       "ds.json: optimizer.params.weight_decay is -0.1: use a number >= 0"},
      {R"([1, 2])", "ds.json: the config is [1,2]: use a JSON object"},
      {R"({"activation_checkpointing": {"cpu_checkpointing": 1}})",
       "ds.json: activation_checkpointing.cpu_checkpointing is 1: use true or false"},
      {R"({"activation_checkpointing": {"number_checkpoints": 0}})",
       "ds.json: activation_checkpointing.number_checkpoints is 0: use 1 or more checkpoints, or "
       "null"},
      {R"({"activation_checkpointing": true})",
       "ds.json: activation_checkpointing is true: use an object"},
      {R"({"gradient_clipping": 1.0, "gradient_clipping": 0.5})",
       "ds.json: key gradient_clipping appears twice in one object: keep one (JSON parsers "
       "disagree on which wins)"},
      {R"({"zero_optimization": {"stage": 1, "overlap_comm": true, "stage": 3}})",
       "ds.json: key zero_optimization.stage appears twice in one object: keep one (JSON parsers "
       "disagree on which wins)"},
      {R"({"a\nb": {"c\n": 1, "c\n": 2}})",  // control characters in the path stay escaped
       "ds.json: key a\\nb.c\\n appears twice in one object: keep one (JSON parsers disagree "
       "on which wins)"},
      {R"({"train_batch_size": "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"})",
       R"(ds.json: train_batch_size is "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa...: use 1 or more samples)"},
  };
  for (const auto& bad : cases) EXPECT_EQ(error_of(bad.text), bad.message) << bad.text;
}

// nlohmann's byte position, turned into the 1-based line and column of the offending character.
TEST(DsConfig, MalformedJsonNamesLineAndColumn) {
  const std::string text =
      "{\n"
      "  \"train_micro_batch_size_per_gpu\": 8,\n"
      "  \"gradient_clipping\": oops\n"
      "}\n";
  EXPECT_EQ(error_of(text).rfind("ds.json: line 3, column 24: not valid JSON: syntax error", 0), 0u)
      << error_of(text);
  EXPECT_EQ(error_of("{\"a\": 1,}").rfind("ds.json: line 1, column 9: not valid JSON: ", 0), 0u)
      << error_of("{\"a\": 1,}");
  EXPECT_EQ(error_of("{\n\"a\": 1\n").rfind("ds.json: line 3, column 1: not valid JSON: ", 0), 0u)
      << error_of("{\n\"a\": 1\n");  // the input ended early: one past its last character
  EXPECT_EQ(error_of("").rfind("ds.json: line 1, column 1: not valid JSON: ", 0), 0u);
  // Too large for a double: json::parse gives no position for this one; the locator does.
  EXPECT_EQ(error_of("{\n\"gradient_clipping\": 1e400}"),
            "ds.json: line 2, column 26: not valid JSON: number overflow parsing '1e400'");
  EXPECT_EQ(error_of(text).find('\n'), std::string::npos);
}

// Nesting is bounded as the parse goes: 64 levels parse (the extra keys warn), 65 are refused in
// one line, and so is a file of 174,000 levels (under the 1 MiB limit), which a parser that
// rebuilt each key's path from its levels took minutes to read.
TEST(DsConfig, NestingDeeperThanTheLimitIsRefusedAsTheParseReachesIt) {
  const auto nested = [](std::size_t levels) {
    std::string text;
    for (std::size_t level = 1; level < levels; ++level) text += R"({"a":)";
    text += "{}";
    text.append(levels - 1, '}');
    return text;
  };
  const std::string refused =
      "ds.json: objects and arrays nest deeper than 64 levels: a DeepSpeed config nests a few; "
      "give a DeepSpeed JSON config";
  EXPECT_EQ(error_of(nested(64)), "");
  EXPECT_EQ(error_of(nested(65)), refused);
  EXPECT_EQ(error_of(nested(174'000)), refused);
  EXPECT_EQ(error_of(std::string(100'000, '[') + std::string(100'000, ']')), refused);
}

// A key twice in an object that is an array's element is named by the key above the array, not
// by a key of an earlier element.
TEST(DsConfig, AKeyTwiceInAnArraysObjectIsNamedByItsOwnPath) {
  EXPECT_EQ(error_of(R"({"a": [{"b": 1}, {"c": 1, "c": 2}]})"),
            "ds.json: key a.c appears twice in one object: keep one (JSON parsers disagree on "
            "which wins)");
}

// DeepSpeed's rule: train_batch_size = micro batch * accumulation steps * world.
TEST(DsConfig, TrainBatchSizeMustBeMicroTimesAccumTimesWorld) {
  Applied a = apply(
      R"({"train_batch_size": 64, "train_micro_batch_size_per_gpu": 4,
          "gradient_accumulation_steps": 4})");
  a.config.world = 4;
  EXPECT_NO_THROW(check_train_batch_size(a.ds, a.config));
  a.config.world = 2;
  try {
    check_train_batch_size(a.ds, a.config);
    ADD_FAILURE() << "a mismatch passed";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(),
                 "ds.json: train_batch_size is 64 but train_micro_batch_size_per_gpu 4 * "
                 "gradient_accumulation_steps 4 * world 2 = 32: make them agree (or set "
                 "--micro-batch, --grad-accum, --world)");
  }
  a.config.micro_batch = std::int64_t{1} << 62;  // the product overflows: still a mismatch
  EXPECT_THROW(check_train_batch_size(a.ds, a.config), Error);
  const Applied without = apply("{}");
  EXPECT_NO_THROW(check_train_batch_size(without.ds, without.config));
}

}  // namespace
}  // namespace zl
