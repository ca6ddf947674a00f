// train.hpp — runs a whole training job: the run layer's one entry point for the command, the
// lessons and the tests. train() builds the world (the simulator's threads, this process's rank of
// an MPI or NCCL job, or one process for the reference), a device, the model and an engine per
// rank, steps it (each engine averages the logged loss across ranks), and collects the final state
// and each rank's ledgers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "comm/traffic_ledger.hpp"
#include "core/memory_ledger.hpp"
#include "engines/engine.hpp"
#include "engines/partition.hpp"
#include "run/train_config.hpp"
#include "timeline.hpp"

namespace zl {

/// What one step reports, as the command prints it.
struct StepRecord {
  std::int64_t step = 0;  ///< 0-based
  float loss = 0.0f;      ///< mean over the W micro-batches
  double grad_norm = 0.0;  ///< global L2 norm of the averaged gradient, before clipping
  double step_ms = 0.0;  ///< wall time of engine.step() on rank 0
  /// Rank 0's wall time from the start of the run's first step to the end of this one.
  double wall_ms = 0.0;
  /// The learning rate the step's update used (for a skipped step: the one it would have used;
  /// the schedule then stays where it was).
  double lr = 0.0;
  /// fp16: the loss scale this step's backward multiplied the loss by; absent otherwise.
  std::optional<double> loss_scale;
  bool skipped = false;  ///< the norm was not finite and NonFinitePolicy::Skip skipped the update
  /// Rank 0's simulated timeline over the step (the logged loss's all_reduce included).
  double compute_ms = 0.0;
  double comm_ms = 0.0;  ///< simulated time the comm stream was busy
  double exposed_comm_ms = 0.0;  ///< the compute stream's wait while comm was busy
  double copy_ms = 0.0;          ///< the compute stream's time blocked by host copies (offload)
  double sim_step_ms = 0.0;      ///< simulated time of the step
  /// Tokens (GPT) or rows (MLP) the step trained on over all ranks and micro-batches.
  std::int64_t tokens = 0;
  /// Times rank 0's device made the host wait inside the step (Device::host_waits; the
  /// synchronize that ends the step not counted): 0 on the CPU.
  std::int64_t host_waits = 0;
  /// Milliseconds rank 0's host was blocked in those waits (Device::host_wait_ms): 0 where the
  /// device never blocks (the CPU's, the detached stand-in).
  double host_wait_ms = 0.0;
  /// Milliseconds the synchronize that ends the step blocked rank 0's host: how far the device's
  /// queued work ran behind the host once the step's last call returned. With host_wait_ms, the
  /// rest of step_ms is the host's own time issuing the step; where that is most of it, the
  /// device waited for the host.
  double drain_ms = 0.0;
  /// Rank 0's device memory after the step: bytes held and peak bytes per category.
  MemoryLedger memory;
};

/// One rank's measured ledgers at the end of the run.
struct RankReport {
  int rank = 0;           ///< the rank these ledgers belong to
  MemoryLedger memory;    ///< bytes held and peak bytes per category, read after the last step
  TrafficLedger traffic;  ///< bytes sent and received and calls per collective over the steps
};

/// The samples a run used, micro-step-major, then rank, then row (micro-step m, rank r uses rows
/// (m*W + r)*B ... + B-1; step t's k-th accumulated micro-batch is micro-step t*k_total + k).
/// MLP: x [rows, features] and labels y [rows]. GPT: tokens [rows, T] and next tokens y [rows, T].
struct UsedData {
  std::vector<float> x;               ///< MLP inputs [rows, features]; empty for the GPT
  std::vector<std::int64_t> y;        ///< MLP labels [rows], or GPT next tokens [rows, T]
  std::vector<std::int64_t> tokens;   ///< GPT input tokens [rows, T]; empty for the MLP
};

/// Everything a run produced.
struct TrainResult {
  std::vector<UnitLayout> layout;  ///< units laid out for the run's world
  std::vector<StepRecord> steps;   ///< the steps this run made (from the resumed step on)
  ModelState final_state;  ///< full parameters and Adam moments after the last step (unpadded)
  std::vector<RankReport> ranks;  ///< one per rank (one in total for the reference)
  UsedData data;                  ///< filled when config.record_data
  /// One per rank: the simulated times of every step; with config.record_timeline also the
  /// program (for what-if replays) and the events (for the trace).
  std::vector<TimelineRecord> timelines;
  double compute_scale = 1.0;  ///< simulated compute ms per measured CPU ms
  double cpu_gflops = 0.0;     ///< with a device: the measured CPU GEMM rate behind the scale
  /// False in the processes of ranks 1.. of an Mpi run, whose result is empty: rank 0's process
  /// holds the steps, the final state and every rank's ledgers and step times (only the steps:
  /// the Mpi backend keeps no timeline program or events).
  bool has_results = true;
};

/// Sharded checkpoints of a run (src/ckpt/checkpoint.hpp): where to save, how often, and where
/// to resume from. Checkpoints need a distributed engine (stage 0-3).
struct CheckpointPlan {
  std::filesystem::path dir;       ///< save here; empty: never save
  std::int64_t every_steps = 0;    ///< save after every K steps (0: none); the last is always saved
  std::filesystem::path resume;    ///< resume from this checkpoint (or step) directory
  /// On resume, a setting that differs from the checkpoint's (lr, betas, eps, weight decay,
  /// schedule, seed) replaces it instead of failing the run.
  bool override_settings = false;
};

/// A file a run writes at its end (the command's --metrics, --save-final, ...). Rank 0 locks it
/// from the run's start (run/run_locks.hpp), so a second run that names it fails before writing.
struct OutputFile {
  std::filesystem::path path;  ///< where it is written
  std::string flag;            ///< the flag that named it, for messages ("--metrics")
};

/// Called on rank 0 after each step.
using StepCallback = std::function<void(const StepRecord&)>;

/// Called on rank `rank`'s thread at each engine event (see EngineObserver).
using RankObserver = std::function<void(int rank, const EngineEvent&, const MemoryLedger&)>;

/// Runs `config` to the end. Throws zl::Error on bad config or a failed rank (then every rank's
/// thread has ended; on the Mpi backend a failing rank prints "rank R: ..." and aborts the job), and at the first step whose gradient norm is not finite unless
/// config.nonfinite is Skip ("step 7: gradient norm is nan: ...", with no rank: all agree). The
/// ledgers in the result are read right after the last step (before the final state is assembled).
/// With `checkpoints.resume`, the run continues from the checkpoint's step (`config.steps` is
/// the total counted from the run's start): same W, any stage, bitwise as if never interrupted;
/// another W re-slices every unit and the data continue by global sample index. Rank 0 owns the
/// checkpoint folder and the `outputs` its caller writes after the run from before the first step
/// to the end (run/run_locks.hpp): another run holding one is an error before anything is written.
TrainResult train(const TrainConfig& config, const StepCallback& on_step = {},
                  const RankObserver& observer = {}, const CheckpointPlan& checkpoints = {},
                  const std::vector<OutputFile>& outputs = {});

/// GFLOP/s of this machine's fp32 GEMM (the CPU device's linear_forward on 256 x 256 x 256, on
/// the calling thread): what a rank's measured CPU time is divided by when a device preset
/// scales it.
double measure_cpu_gflops();

/// Training FLOPs per token (GPT) or row (MLP): 6N for the parameters' GEMMs forward and
/// backward, plus, for the GPT, 6 L C T for attention's scores and weighted sums (nanoGPT's and
/// PaLM's convention, with T the trained sequence length).
double train_flops_per_token(const TrainConfig& config);

/// Training FLOPs of one optimizer step of the whole world: train_flops_per_token times the
/// tokens (GPT) or rows (MLP) of W ranks' micro-batches and accumulation steps.
double train_flops_per_step(const TrainConfig& config);

/// The parameters every engine starts from: unpadded, one vector per unit.
std::vector<std::vector<float>> initial_params(const TrainConfig& config);

}  // namespace zl
