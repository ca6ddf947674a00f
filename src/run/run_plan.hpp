// run_plan.hpp — what every rank of a run shares, settled once before any rank starts: the
// validated config, the checkpoint plan and the manifest it resumes from, where the run starts
// (step and global sample), the --init tensors, the engines' options with their data source, and
// how the ranks' timelines measure compute.
#pragma once

#include <cstdint>
#include <optional>

#include "ckpt/manifest.hpp"
#include "engines/engine.hpp"
#include "model/named_init.hpp"
#include "run/train.hpp"
#include "timeline.hpp"

namespace zl {

/// Where a run starts: step 0 and sample 0, or a checkpoint's step and next global sample.
struct StartPoint {
  std::int64_t step = 0;    ///< the first step this run makes
  std::int64_t sample = 0;  ///< the global index of the first sample it draws
};

/// How the ranks' timelines count: simulated compute is measured CPU time, or that scaled to the
/// device preset (config.device).
struct TimelineSetup {
  TimelineOptions options;  ///< the link, the compute scale and what to record
  double cpu_gflops = 0.0;  ///< with a device preset: the measured CPU GEMM rate behind the scale
};

/// One run, decided: what train() hands to every rank's loop and every launcher.
struct RunPlan {
  TrainConfig config;          ///< validated
  CheckpointPlan checkpoints;  ///< where to save, how often, where from
  Manifest resumed;            ///< the checkpoint resumed from (when resuming())
  StartPoint start;            ///< the resumed step and sample, or zero
  NamedTensors init;           ///< --init's tensors, checked against the model (empty without)
  /// The step resumed from when it is in the folder this run saves to: rank 0 points that
  /// folder's `latest` at it before the first save.
  std::optional<std::int64_t> resumed_own_step;
  /// The engines' options without an observer (each rank adds its own); their batch source
  /// records every sample into the result's UsedData when config.record_data.
  EngineOptions options;
  TimelineSetup timeline;  ///< how each rank's timeline measures
  /// The files the caller writes after the run, locked by rank 0 with the checkpoint folder.
  std::vector<OutputFile> outputs;
  /// This run's id (new_run_id()), written into its checkpoints. Each process of an mpi or nccl
  /// job makes one; its launcher replaces them all with rank 0's before the first step.
  std::string run_id;
  std::int64_t step_tokens = 0;  ///< tokens (GPT) or rows (MLP) of one step over all ranks

  bool saving() const { return !checkpoints.dir.empty(); }       ///< checkpoints are written
  bool resuming() const { return !checkpoints.resume.empty(); }  ///< the run starts from one
};

/// Validates `config` and `checkpoints`, reads and verifies the checkpoint resumed from and the
/// --init file, and builds the data source; with config.record_data, sizes `used` for every
/// sample the run will draw. Throws zl::Error naming what is wrong before any rank starts.
RunPlan plan_run(const TrainConfig& config, const CheckpointPlan& checkpoints, UsedData& used);

/// The manifest of the checkpoint run `run_id` saves after `step` steps, for shards `state` laid
/// out as `layout`.
Manifest manifest_of(const TrainConfig& config, std::string_view run_id, std::int64_t step,
                     const ShardState& state, const std::vector<UnitLayout>& layout);

}  // namespace zl
