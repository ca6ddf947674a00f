// trainer.hpp — runs a whole training job: builds the world (the simulator's threads, this
// process's rank of an MPI or NCCL job, or one process for the reference), a device, the model
// and an engine per rank, steps it (each engine averages the logged loss across ranks), and collects the
// final state and each rank's ledgers.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <vector>

#include "comm/mpi/mpi_reduce.hpp"
#include "comm/traffic_ledger.hpp"
#include "core/memory_ledger.hpp"
#include "engines/engine.hpp"
#include "engines/partition.hpp"
#include "engines/rank_device.hpp"
#include "fault_injection.hpp"
#include "links.hpp"
#include "model/gpt_config.hpp"
#include "model/mlp.hpp"
#include "timeline.hpp"

namespace zl {

/// The models `zerolab train --model` offers.
enum class ModelKind { Mlp, Gpt };

/// "mlp" or "gpt".
std::string_view model_name(ModelKind kind);

/// Where the ranks of a distributed engine run (`--backend`).
enum class Backend : std::uint8_t {
  Sim,  ///< W threads in this process (SimWorld): bit-exact, with the simulated timeline
  Mpi,  ///< one rank per process under `mpirun -np W` (MpiComm); W is the number of processes
  /// one rank per process and GPU (NcclComm on a CudaDevice), launched by mpirun or torchrun-style
  /// variables (RANK, WORLD_SIZE, LOCAL_RANK); a single process without them is W = 1
  Nccl,
};

/// "sim", "mpi" or "nccl".
std::string_view backend_name(Backend backend);

/// The number of ranks `backend` was launched with: the processes of the MPI job for Mpi
/// (initialising MPI; 1 for a process started without mpirun), WORLD_SIZE (or mpirun's size, or
/// 1) for Nccl, nullopt for Sim, whose world is whatever the config says. Throws zl::Error for
/// Mpi when zerolab was built without MPI.
std::optional<int> launched_world(Backend backend);

/// Everything that defines a run. Two runs with equal configs produce identical bits.
struct TrainConfig {
  ModelKind model = ModelKind::Mlp;  ///< which model trains (--model)
  MlpConfig mlp;  ///< the MLP's shape (model Mlp)
  GptConfig gpt;  ///< the GPT's shape (model Gpt)
  /// GPT only: train on this uint16 token file (nanoGPT's .bin) instead of the synthetic task.
  std::filesystem::path data_file{};
  /// Precision, loss scaling, accumulation, clipping, buckets, prefetch, persistence.
  TrainingFeatures features{};
  EngineKind engine = EngineKind::Ddp;  ///< the reference or a stage's engine (--stage, --engine)
  /// Sim, or Mpi: then `world` must be the number of processes (launched_world()) and the
  /// results are bitwise the sim's with MpiReduce::Deterministic, close with Native.
  Backend backend = Backend::Sim;
  MpiReduce mpi_reduce = MpiReduce::Deterministic;  ///< how the Mpi backend reduces
  /// Where each rank computes (--accelerator): Cpu; Cuda (the Nccl backend's, or the sim's ranks
  /// sharing GPU 0); CpuDetached (tests: bitwise Cpu, with memory the host may not touch).
  Accelerator accelerator = Accelerator::Cpu;
  int world = 1;           ///< ranks W (the reference plays all W in one process)
  std::int64_t steps = 10;  ///< optimizer steps, counted from the run's start (also when resuming)
  std::int64_t micro_batch = 32;  ///< rows per rank per micro-step (train_micro_batch_size_per_gpu)
  AdamWConfig adamw;  ///< learning rate, betas, eps, weight decay (torch.optim.AdamW's meaning)
  std::uint64_t seed = 0;    ///< parameter init and data
  bool record_data = false;  ///< keep every sample the engines were given (for --save-data)
  /// Sim only: the longest a rank waits in one collective before the run fails naming it.
  std::chrono::milliseconds collective_timeout{std::chrono::seconds(120)};
  /// Steps whose gradient norm is NaN or infinite stop the run (Stop) or are skipped (Skip).
  NonFinitePolicy nonfinite = NonFinitePolicy::Stop;
  std::vector<FaultSpec> faults{};  ///< injected into the simulated ranks (--inject-fault)
  /// Start from these parameters (fp32 safetensors with the model's names, e.g. written by
  /// `zerolab consolidate` or --save-final) instead of the random init; empty: random init.
  std::filesystem::path init_file{};
  /// The simulated timeline (docs/timeline.md): collectives cost alpha + bytes / busbw on `link`;
  /// compute is each rank's measured CPU time, scaled to `device` when one other than "cpu" is
  /// given. Never changes results.
  LinkPreset link = link_preset(kDefaultLink);
  std::optional<DevicePreset> device{};  ///< scale compute to this device (--device); none: CPU time
  /// Keep every rank's timeline program and events (for --trace and --what-if-world).
  bool record_timeline = false;
};

/// Throws zl::Error with a one-line message naming the bad setting and what to use instead.
void validate(const TrainConfig& config);

/// What one step reports, as the command prints it.
struct StepRecord {
  std::int64_t step = 0;  ///< 0-based
  float loss = 0.0f;      ///< mean over the W micro-batches
  double grad_norm = 0.0;  ///< global L2 norm of the averaged gradient, before clipping
  double step_ms = 0.0;  ///< wall time of engine.step() on rank 0
  bool skipped = false;  ///< the norm was not finite and NonFinitePolicy::Skip skipped the update
  /// Rank 0's simulated timeline over the step (the logged loss's all_reduce included).
  double compute_ms = 0.0;
  double comm_ms = 0.0;  ///< simulated time the comm stream was busy
  double exposed_comm_ms = 0.0;  ///< the compute stream's wait while comm was busy
  double sim_step_ms = 0.0;      ///< simulated time of the step
  /// Tokens (GPT) or rows (MLP) the step trained on over all ranks and micro-batches.
  std::int64_t tokens = 0;
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
  std::int64_t every_steps = 0;    ///< save after every K steps; the last step is always saved
  std::filesystem::path resume;    ///< resume from this checkpoint (or step) directory
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
/// another W re-slices every unit and the data continue by global sample index.
TrainResult train(const TrainConfig& config, const StepCallback& on_step = {},
                  const RankObserver& observer = {}, const CheckpointPlan& checkpoints = {});

/// GFLOP/s of this machine's fp32 GEMM (the CPU device's linear_forward on 256 x 256 x 256, on
/// the calling thread): what a rank's measured CPU time is divided by when a device preset
/// scales it.
double measure_cpu_gflops();

/// The parameters every engine starts from: unpadded, one vector per unit.
std::vector<std::vector<float>> initial_params(const TrainConfig& config);

}  // namespace zl
