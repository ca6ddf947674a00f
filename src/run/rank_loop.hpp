// rank_loop.hpp — one rank's whole run, the same on every backend: its model and engine, the
// resumed shards, the steps with their checkpoint saves and step records, then its ledgers and the
// full state. Beside it, the reference's run: one process playing all W ranks.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ckpt/manifest.hpp"
#include "comm/comm.hpp"
#include "ops/device.hpp"
#include "run/rank_reports.hpp"
#include "run/run_plan.hpp"
#include "run/train.hpp"
#include "timeline.hpp"

namespace zl {

/// What one rank's run leaves behind.
struct RankRun {
  RankReport report;  ///< its ledgers, read right after the last step
  std::vector<UnitLayout> layout;  ///< the units laid out for the run's world
  ModelState state;     ///< the full state (every rank assembles it)
  std::string stopped;  ///< the NonFiniteError's message when the run stopped at a non-finite norm
  std::vector<StepTimes> step_times;  ///< its timeline's times of every step
};

/// Hands a rank's part of a checkpoint save over once it has written its file (or failed to);
/// returns every rank's on rank 0 (rank 0 first), once all have tried. Collective.
using ShareFile = std::function<std::vector<RankFile>(Comm&, RankFile)>;

/// Who hears of a run's progress: rank 0 appends each step's record to `steps` and calls
/// `on_step`; every rank calls `observer` at each engine event. All outlive the run.
struct RankCallbacks {
  const StepCallback& on_step;    ///< rank 0, after each step (may be empty)
  const RankObserver& observer;   ///< every rank, at each engine event (may be empty)
  std::vector<StepRecord>& steps;  ///< rank 0's records, in step order
};

/// Runs rank comm.rank() of `plan` on `comm` and `device`, with `clocks` its timeline: builds its
/// model and engine, loads its resumed shards, makes the steps (saving checkpoints when due,
/// through `share_file`), and returns its ledgers and the full state (collective). A non-finite
/// gradient norm under NonFinitePolicy::Stop ends it early with RankRun::stopped set, on every
/// rank after the same step.
RankRun run_rank(const RunPlan& plan, Comm& comm, Device& device, RankTimeline& clocks,
                 const ShareFile& share_file, const RankCallbacks& callbacks);

/// Runs `plan` on the unsharded reference engine in this process (the CPU, one timeline of
/// compute only) and fills `result`'s layout, rank report, timeline and final state.
void run_reference(const RunPlan& plan, const RankCallbacks& callbacks, TrainResult& result);

}  // namespace zl
