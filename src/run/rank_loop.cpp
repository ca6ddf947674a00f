// rank_loop.cpp — a rank's engine stepped from the plan's start to its last step: each step timed
// (wall and simulated), recorded on rank 0, and followed by a checkpoint save when one is due.
#include "run/rank_loop.hpp"

#include <optional>

#include "ckpt/checkpoint.hpp"
#include "ckpt/checkpoint_folder.hpp"
#include "ckpt/reshard.hpp"
#include "core/steady_ms.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "run/rank_model.hpp"
#include "run/run_locks.hpp"
#include "run/swap_folders.hpp"

namespace zl {

namespace {

// The engine phases that end a span of computation, and the span's name on the timeline.
std::optional<std::string> compute_label(const EngineEvent& event) {
  if (event.phase != "forward" && event.phase != "backward" && event.phase != "update") {
    return std::nullopt;
  }
  return event.unit >= 0 ? fmt::format("{} {}", event.phase, event.unit) : std::string(event.phase);
}

// Rank `rank`'s engine options: its events name the compute spans of its timeline and reach the
// observer, whose own work is not counted as the step's; its swap files go in `swap_folders`.
EngineOptions options_of_rank(const RunPlan& plan, int rank, RankTimeline& clocks,
                              const RankObserver& observer,
                              const RankSwapFolders* swap_folders = nullptr) {
  EngineOptions own = plan.options;
  if (swap_folders != nullptr) own.features = swap_folders->features();
  own.observer = [&observer, rank, clocks = &clocks](const EngineEvent& event,
                                                     const MemoryLedger& ledger) {
    if (auto label = compute_label(event)) clocks->mark(*label);
    if (!observer) return;
    observer(rank, event, ledger);
    clocks->discard();
  };
  return own;
}

// Makes the plan's steps on `engine` (whose loss is already the mean over ranks); `after_step`
// gets the number of completed steps. Rank 0 records each step.
void run_steps(const RunPlan& plan, Engine& engine, Device& device, bool is_rank0,
               RankTimeline& clocks, const RankCallbacks& callbacks,
               const std::function<void(std::int64_t)>& after_step) {
  const double run_started_ms = steady_ms();
  for (std::int64_t step = plan.start.step; step < plan.config.steps; ++step) {
    const double started_ms = steady_ms();
    clocks.begin_step(step);
    const std::int64_t waits_before = device.host_waits();
    const double waited_before_ms = device.host_wait_ms();
    const StepStats stats = engine.step(step);
    const std::int64_t host_waits = device.host_waits() - waits_before;
    const double waited_in_step_ms = device.host_wait_ms();
    device.synchronize();  // a GPU's step has ended when its queued work has
    const double host_wait_ms = waited_in_step_ms - waited_before_ms;
    const double drain_ms = device.host_wait_ms() - waited_in_step_ms;
    const double step_ms = steady_ms() - started_ms;
    const StepTimes times = clocks.end_step();
    std::optional<double> loss_scale;  // fp16's, for the step record
    if (plan.config.features.precision == DType::F16) loss_scale = stats.loss_scale;
    const StepRecord record{.step = step,
                            .loss = stats.loss,
                            .grad_norm = stats.grad_norm,
                            .step_ms = step_ms,
                            .wall_ms = steady_ms() - run_started_ms,
                            .lr = stats.lr,
                            .loss_scale = loss_scale,
                            .skipped = stats.skipped,
                            .compute_ms = times.compute_ms,
                            .comm_ms = times.comm_ms,
                            .exposed_comm_ms = times.exposed_comm_ms,
                            .copy_ms = times.copy_ms,
                            .sim_step_ms = times.step_ms,
                            .tokens = plan.step_tokens,
                            .host_waits = host_waits,
                            .host_wait_ms = host_wait_ms,
                            .drain_ms = drain_ms,
                            .memory = device.ledger()};
    after_step(step + 1);
    if (!is_rank0) continue;
    callbacks.steps.push_back(record);
    if (callbacks.on_step) callbacks.on_step(record);
  }
}

// After `done` steps, when a save is due: every rank writes its file; once all have (share_file),
// rank 0 commits the manifest and `latest`, and all wait for it. A rank that cannot write its
// file (a full disk) does not fail alone: it hands its reason over, and rank 0 fails the save
// with the first rank's reason, so the run ends with one line (under mpirun every failing process
// would print its own).
void save_if_due(const RunPlan& plan, Engine& engine, Comm& comm,
                 const std::vector<UnitLayout>& layout, const ShareFile& share_file,
                 std::int64_t done) {
  const CheckpointPlan& checkpoints = plan.checkpoints;
  const bool due = done == plan.config.steps ||
                   (checkpoints.every_steps > 0 && done % checkpoints.every_steps == 0);
  if (!plan.saving() || !due) return;
  const ShardState state = engine.shard_state();
  RankFile own;
  try {
    own.entry =
        write_rank_file(step_dir(checkpoints.dir, done), comm.rank(), layout, state, plan.run_id);
  } catch (const Error& error) {
    own.error = error.what();
  }
  const std::vector<RankFile> shared = share_file(comm, std::move(own));
  if (comm.rank() == 0) {
    std::vector<FileEntry> files;
    for (std::size_t rank = 0; rank < shared.size(); ++rank) {
      const std::string& error = shared[rank].error;
      if (!error.empty()) {
        if (rank == 0) fail("{}", error);
        fail("cannot save step {}: rank {}: {}", done, rank, error);
      }
      files.push_back(shared[rank].entry);
    }
    commit_checkpoint(checkpoints.dir, manifest_of(plan.config, plan.run_id, done, state, layout),
                      files);
  }
  comm.barrier();
}

}  // namespace

RankRun run_rank(const RunPlan& plan, Comm& comm, Device& device, RankTimeline& clocks,
                 const ShareFile& share_file, const RankCallbacks& callbacks) {
  // Rank 0 owns the checkpoint folder and the output files for the whole run, from before
  // anything is written: the other ranks write their files only at a save, after collectives rank
  // 0 takes part in.
  std::vector<FileLock> owned;
  if (comm.rank() == 0) {
    owned = lock_run_files(plan);
    if (plan.saving()) tidy_checkpoint_folder(plan.checkpoints.dir, plan.resumed_own_step);
  }
  // Before the engine makes its swap files; removed after the engine has removed them.
  const RankSwapFolders swap_folders(plan.options.features, comm.rank(), comm.size());
  RankRun run;
  RankModel rank_model(device, plan.config, plan.init);
  Model& model = rank_model.get();
  const std::vector<UnitLayout> layout = layout_units(model.units(), plan.config.world);
  const EngineFactory& factory =
      plan.config.engine_factory ? plan.config.engine_factory : EngineFactory(make_engine);
  auto engine =
      factory(plan.config.engine, model, device, comm,
              options_of_rank(plan, comm.rank(), clocks, callbacks.observer, &swap_folders));
  if (plan.resuming()) {
    // A shard that cannot be read is a bad input, as it is to `consolidate` (exit code 3); flags
    // that describe another model than the checkpoint's stay a bad request (check_same_model).
    ShardState shards = with_error_kind(ErrorKind::Input, [&] {
      return load_rank_shards(plan.resumed, layout, comm.rank(), plan.config.world);
    });
    shards.scaler = plan.resumed.loss_scaler;
    engine->load_shard_state(shards);
  }
  try {
    run_steps(plan, *engine, device, comm.rank() == 0, clocks, callbacks, [&](std::int64_t done) {
      save_if_due(plan, *engine, comm, layout, share_file, done);
    });
  } catch (const NonFiniteError& e) {
    // The norm has the same bits everywhere, so all ranks leave here after the same step; a
    // rank that did not would leave the others waiting, which the simulator reports.
    run.stopped = e.what();
    return run;
  }
  run.report = {comm.rank(), device.ledger(), comm.traffic()};
  run.step_times = clocks.clocks().steps();
  run.state = engine->full_state();
  run.layout = layout;
  return run;
}

void run_reference(const RunPlan& plan, const RankCallbacks& callbacks, TrainResult& result) {
  const std::vector<FileLock> owned = lock_run_files(plan);
  CpuDevice device(run_threads(plan.config), plan.config.kernel_grain);
  RankModel rank_model(device, plan.config, plan.init);
  Model& model = rank_model.get();
  result.layout = layout_units(model.units(), plan.config.world);
  RankTimeline clocks(1, plan.timeline.options);  // one process: compute only
  clocks.start();
  auto engine = make_reference_engine(model, device, plan.config.world,
                                      options_of_rank(plan, 0, clocks, callbacks.observer),
                                      plan.config.gpus_per_node);
  run_steps(plan, *engine, device, true, clocks, callbacks, [](std::int64_t) {});
  result.ranks.push_back({0, device.ledger(), TrafficLedger{}});
  result.timelines.push_back({.rank = 0,
                              .steps = clocks.clocks().steps(),
                              .program = clocks.clocks().program(),
                              .events = clocks.clocks().events()});
  result.final_state = engine->full_state();
}

}  // namespace zl
