// run_plan.cpp — settles a run before any rank starts: checks, the resumed manifest, the --init
// file, the data source and the timelines' compute scale.
#include "run/run_plan.hpp"

#include <algorithm>

#include "ckpt/checkpoint.hpp"
#include "ckpt/checkpoint_folder.hpp"
#include "engines/estimate.hpp"
#include "model/gpt_config.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "run/data_source.hpp"
#include "run/memory_check.hpp"
#include "run/rank_model.hpp"
#include "run/resume_settings.hpp"

namespace zl {

namespace fs = std::filesystem;

namespace {

// The ranks' timelines: simulated compute is measured CPU time, or that scaled to the device.
TimelineSetup timeline_setup(const TrainConfig& config) {
  TimelineSetup setup;
  setup.options.link = config.link;
  setup.options.nodes = node_links(config);
  setup.options.host_link = config.host_link;
  setup.options.disk_link = config.disk_link;
  setup.options.record_program = config.record_timeline;
  setup.options.record_events = config.record_timeline;
  if (config.device && !is_measured_cpu(*config.device)) {
    setup.cpu_gflops = measure_cpu_gflops();
    setup.options.compute_scale =
        setup.cpu_gflops / achieved_gflops(*config.device, config.features.precision);
  }
  return setup;
}

bool same_folder(const fs::path& a, const fs::path& b) {
  std::error_code error;
  return fs::equivalent(a, b, error);
}

// Reads and verifies the checkpoint once; every rank then loads its own (re-sliced) shards.
// Resuming the folder this run also saves to, it takes the newest committed step there, whatever
// `latest` says: a kill between a step's manifest and `latest` leaves `latest` one step behind,
// and following it would save a step that is already committed.
// The settings the checkpoint remembers must agree with the config (the CLI has already taken
// the ones its flags left out), unless the caller overrides them.
void plan_resume(RunPlan& plan) {
  const fs::path from = resume_step_dir(plan.checkpoints);
  const bool own_folder =
      plan.saving() && same_folder(plan.checkpoints.resume, plan.checkpoints.dir);
  plan.resumed = read_manifest(from);
  if (own_folder) plan.resumed_own_step = plan.resumed.step;
  settle_resume_settings(plan.config, plan.resumed, from.string(), kAllResumeSettings,
                         plan.checkpoints.override_settings);
  plan.start = {plan.resumed.step, next_sample(plan.resumed)};
  // A checkpoint at the last step is a finished run: resuming it trains nothing and writes the
  // final outputs from it (a run killed after its last save and before its exit ends so).
  ZL_CHECK(plan.config.steps >= plan.start.step,
           "{} is at step {}: --steps counts from the run's start, so give {} or more",
           plan.checkpoints.resume.string(), plan.start.step, plan.start.step);
}

}  // namespace

RunPlan plan_run(const TrainConfig& requested, const CheckpointPlan& checkpoints, UsedData& used) {
  validate(requested);
  RunPlan plan;
  plan.config = requested;
  plan.checkpoints = checkpoints;
  const TrainConfig& config = plan.config;  // settled against the checkpoint when resuming
  ZL_CHECK(!(plan.saving() || plan.resuming()) || config.engine != EngineKind::Reference,
           "checkpoints need a distributed engine (--stage 0-3): the reference keeps no shards");
  with_error_kind(ErrorKind::Usage, [&] {
    ZL_CHECK(checkpoints.every_steps >= 0, "--checkpoint-every {} is invalid: use 1 or more steps",
             checkpoints.every_steps);
  });
  // Too large for the machine is the request's fault; a checkpoint, --init or data file that is
  // wrong is the input's (their exit codes differ).
  if (config.check_memory) {
    with_error_kind(ErrorKind::Usage, [&] { check_memory(config); });  // before any allocation
  }
  if (plan.resuming()) with_error_kind(ErrorKind::Input, [&] { plan_resume(plan); });
  LrSchedule& schedule = plan.config.lr_schedule;
  if (lr_schedule_decays(schedule.kind) && schedule.total_steps == 0) {
    schedule.total_steps = config.steps;  // the decay ends with the run
  }
  if (plan.saving()) {  // a committed step is never written again: refuse before training
    const std::vector<std::int64_t> steps = committed_steps(checkpoints.dir);
    ZL_CHECK(steps.empty() || steps.back() <= plan.start.step,
             "{} already holds committed step {}, after this run's start at step {}: resume from "
             "it (--resume {}) or save to another folder",
             checkpoints.dir.string(), steps.empty() ? 0 : steps.back(), plan.start.step,
             checkpoints.dir.string());
  }
  with_error_kind(ErrorKind::Input, [&] {
    plan.init = init_tensors(config);
    if (!config.init_file.empty()) {  // the file against the model once, before any rank starts
      CpuDevice device;
      RankModel check(device, config, plan.init);
    }
    if (config.record_data) {
      size_used_data(config,
                     (config.steps - plan.start.step) * config.features.grad_accum_steps *
                         config.world * config.micro_batch,
                     used);
    }
  });
  plan.options = {.adamw = config.adamw,
                  .lr_schedule = config.lr_schedule,
                  .seed = config.seed,
                  .batch = with_error_kind(ErrorKind::Input,
                                           [&] {
                                             return batch_source(
                                                 config, plan.start.step, plan.start.sample,
                                                 config.record_data ? &used : nullptr);
                                           }),
                  .observer = {},
                  .nonfinite = config.nonfinite,
                  .features = config.features};
  plan.options.features.node_ranks = config.gpus_per_node;  // the world's layout, for the engines
  plan.timeline = timeline_setup(config);
  plan.run_id = new_run_id();
  plan.step_tokens = config.world * config.features.grad_accum_steps * config.micro_batch *
                     (config.model == ModelKind::Gpt ? config.gpt.block_size : 1);
  return plan;
}

Manifest manifest_of(const TrainConfig& config, std::string_view run_id, std::int64_t step,
                     const ShardState& state, const std::vector<UnitLayout>& layout) {
  Manifest manifest;
  manifest.run_id = run_id;
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
  manifest.lr_schedule = config.lr_schedule;
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

double train_flops_per_token(const TrainConfig& config) {
  if (config.model == ModelKind::Mlp) return 6.0 * static_cast<double>(mlp_param_count(config.mlp));
  std::int64_t params = 0;
  // The model's parameters, as nanoGPT counts them for MFU: wte's padded rows do no useful work.
  for (const UnitSpec& unit : gpt_units(config.gpt)) params += unit.real_numel();
  const GptConfig& gpt = config.gpt;
  return 6.0 * static_cast<double>(params) + 6.0 * static_cast<double>(gpt.n_layer) *
                                                 static_cast<double>(gpt.n_embd) *
                                                 static_cast<double>(gpt.block_size);
}

double train_flops_per_step(const TrainConfig& config) {
  const double tokens_per_row =
      config.model == ModelKind::Gpt ? static_cast<double>(config.gpt.block_size) : 1.0;
  return train_flops_per_token(config) * tokens_per_row * static_cast<double>(config.world) *
         static_cast<double>(config.micro_batch) *
         static_cast<double>(config.features.grad_accum_steps);
}

}  // namespace zl
