// run_plan.cpp — settles a run before any rank starts: checks, the resumed manifest, the --init
// file, the data source and the timelines' compute scale.
#include "run/run_plan.hpp"

#include <algorithm>

#include "ckpt/checkpoint.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "run/data_source.hpp"
#include "run/rank_model.hpp"

namespace zl {

namespace {

// The ranks' timelines: simulated compute is measured CPU time, or that scaled to the device.
TimelineSetup timeline_setup(const TrainConfig& config) {
  TimelineSetup setup;
  setup.options.link = config.link;
  setup.options.record_program = config.record_timeline;
  setup.options.record_events = config.record_timeline;
  if (config.device && !is_measured_cpu(*config.device)) {
    setup.cpu_gflops = measure_cpu_gflops();
    setup.options.compute_scale =
        setup.cpu_gflops / achieved_gflops(*config.device, config.features.precision);
  }
  return setup;
}

// Reads and verifies the checkpoint once; every rank then loads its own (re-sliced) shards.
void plan_resume(RunPlan& plan) {
  plan.resumed = read_manifest(plan.checkpoints.resume);
  plan.start = {plan.resumed.step, next_sample(plan.resumed)};
  ZL_CHECK(plan.config.steps > plan.start.step,
           "{} is at step {}: --steps counts from the run's start, so give more than {}",
           plan.checkpoints.resume.string(), plan.start.step, plan.start.step);
}

}  // namespace

RunPlan plan_run(const TrainConfig& config, const CheckpointPlan& checkpoints, UsedData& used) {
  validate(config);
  RunPlan plan;
  plan.config = config;
  plan.checkpoints = checkpoints;
  ZL_CHECK(!(plan.saving() || plan.resuming()) || config.engine != EngineKind::Reference,
           "checkpoints need a distributed engine (--stage 0-3): the reference keeps no shards");
  ZL_CHECK(checkpoints.every_steps >= 0, "--checkpoint-every {} is invalid: use 1 or more steps",
           checkpoints.every_steps);
  if (plan.resuming()) plan_resume(plan);
  plan.init = init_tensors(config);
  if (!config.init_file.empty()) {  // check the file against the model once, before any rank starts
    CpuDevice device;
    RankModel check(device, config, plan.init);
  }
  if (config.record_data) {
    size_used_data(config,
                   (config.steps - plan.start.step) * config.features.grad_accum_steps *
                       config.world * config.micro_batch,
                   used);
  }
  plan.options = {.adamw = config.adamw,
                  .seed = config.seed,
                  .batch = batch_source(config, plan.start.step, plan.start.sample,
                                        config.record_data ? &used : nullptr),
                  .observer = {},
                  .nonfinite = config.nonfinite,
                  .features = config.features};
  plan.timeline = timeline_setup(config);
  plan.step_tokens = config.world * config.features.grad_accum_steps * config.micro_batch *
                     (config.model == ModelKind::Gpt ? config.gpt.block_size : 1);
  return plan;
}

Manifest manifest_of(const TrainConfig& config, std::int64_t step, const ShardState& state,
                     const std::vector<UnitLayout>& layout) {
  Manifest manifest;
  manifest.step = step;
  manifest.adam_updates = state.adam_updates;
  if (config.features.precision == DType::F16) manifest.loss_scaler = state.scaler;
  manifest.stage = stage_of(config.engine);
  manifest.world = config.world;
  manifest.model_kind = std::string(model_name(config.model));
  manifest.mlp = config.mlp;
  manifest.gpt = config.gpt;
  manifest.seed = config.seed;
  manifest.micro_batch = config.micro_batch;
  manifest.grad_accum_steps = config.features.grad_accum_steps;
  manifest.adamw = config.adamw;
  manifest.units = layout;
  return manifest;
}

double measure_cpu_gflops() {
  constexpr std::int64_t kN = 256;
  constexpr double kMinCpuMs = 30.0;
  CpuDevice device;
  std::vector<float> x(kN * kN, 0.5f), w(kN * kN, 0.25f), y(kN * kN);
  double best_gflops = 0.0;
  for (int round = 0; round < 3; ++round) {  // the fastest of three rounds: the least disturbed
    const double start_ms = thread_cpu_ms();
    std::int64_t calls = 0;
    double spent_ms = 0.0;
    while (spent_ms < kMinCpuMs / 3) {
      device.linear_forward(x, w, {}, y, kN, kN, kN);
      ++calls;
      spent_ms = thread_cpu_ms() - start_ms;
    }
    const double flops = 2.0 * kN * kN * kN * static_cast<double>(calls);
    best_gflops = std::max(best_gflops, flops / (spent_ms * 1e6));
  }
  return best_gflops;
}

}  // namespace zl
