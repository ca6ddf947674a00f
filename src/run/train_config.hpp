// train_config.hpp — everything that defines a training run (TrainConfig: model, engine, backend,
// accelerator, features, optimizer, seed, faults, timeline) and its validation. Two runs with equal
// configs produce identical bits.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "comm/mpi/mpi_reduce.hpp"
#include "comm/reduce.hpp"
#include "engines/engine.hpp"
#include "fault_injection.hpp"
#include "links.hpp"
#include "model/activation_policy.hpp"
#include "model/gpt_config.hpp"
#include "model/mlp.hpp"
#include "run/rank_device.hpp"

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

/// The ranks the launcher put on this process's node, for Mpi and Nccl: OMPI_COMM_WORLD_LOCAL_SIZE
/// under mpirun, else LOCAL_WORLD_SIZE (torchrun's); nullopt for Sim or when neither is set. The
/// default of --gpus-per-node on those backends. Throws zl::Error for a value that is not a whole
/// number >= 1.
std::optional<int> launched_gpus_per_node(Backend backend);

/// The shortest collective timeout a run accepts. A wait lasts as long as the slowest peer takes
/// to reach the call: its compute since the last collective, and on a machine with more busy
/// threads than cores, the time the scheduler keeps it off a core. Below a second, healthy runs
/// fail on loaded machines (docs/usage.md gives the measured rates); a hang still ends in seconds.
inline constexpr std::chrono::milliseconds kMinCollectiveTimeout{1000};

/// Everything that defines a run. Two runs with equal configs produce identical bits.
struct TrainConfig {
  ModelKind model = ModelKind::Mlp;  ///< which model trains (--model)
  MlpConfig mlp;  ///< the MLP's shape (model Mlp)
  GptConfig gpt;  ///< the GPT's shape (model Gpt)
  /// GPT only: train on these token files instead of the synthetic task: --data as given, comma-
  /// separated paths and glob patterns of nanoGPT's uint16 files and llm.c shards (data_paths()).
  std::string data{};
  /// GPT only: which blocks recompute their activations in backward (--activation-checkpointing).
  /// Changes memory and time, never a bit of the results.
  ActivationPolicy activations{};
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
  /// The attention kernels of a CUDA run (--attention): Default (fast under --bf16 where the
  /// head size allows, else exact), Exact or Fast; the CPU runs exact only.
  AttentionKind attention = AttentionKind::Default;
  int world = 1;           ///< ranks W (the reference plays all W in one process)
  /// GPUs a node (--gpus-per-node): ranks nG .. nG+G-1 share node n, and every reduction sums
  /// each node's ranks first, then the nodes (comm/reduce.hpp), on the sim, mpi and the
  /// reference alike. kOneNode (the default), 1 and W are the flat rank order.
  int gpus_per_node = kOneNode;
  /// CPU threads each rank's kernels run on (--threads, ZL_THREADS); 0: the machine's cores
  /// divided among the W ranks (run_threads()). Never changes a bit of the results.
  int threads = 0;
  /// How finely the CPU kernels cut their work (Normal; Fine in tests, so that small models
  /// reach the threads). Part of what decides the bits of a CPU run, as the shapes are.
  cpu::Grain kernel_grain = cpu::Grain::Normal;
  std::int64_t steps = 10;  ///< optimizer steps, counted from the run's start (also when resuming)
  std::int64_t micro_batch = 32;  ///< rows per rank per micro-step (train_micro_batch_size_per_gpu)
  AdamWConfig adamw;  ///< learning rate, betas, eps, weight decay (torch.optim.AdamW's meaning)
  /// The learning rate of each update (--lr-schedule, DeepSpeed's `scheduler`); a linear or
  /// cosine decay with total_steps 0 ends at `steps`.
  LrSchedule lr_schedule{};
  std::uint64_t seed = 0;    ///< parameter init and data
  bool record_data = false;  ///< keep every sample the engines were given (for --save-data)
  /// The longest a rank waits in one collective before the run fails naming it (sim, mpi and
  /// nccl, where the watchdog then aborts the communicator); at least kMinCollectiveTimeout.
  std::chrono::milliseconds collective_timeout{std::chrono::seconds(120)};
  /// Steps whose gradient norm is NaN or infinite stop the run (Stop) or are skipped (Skip).
  NonFinitePolicy nonfinite = NonFinitePolicy::Stop;
  std::vector<FaultSpec> faults{};  ///< injected into the simulated ranks (--inject-fault)
  /// Start from these parameters (fp32 safetensors with the model's names, e.g. written by
  /// `zerolab consolidate` or --save-final, or a Hugging Face GPT-2 folder: config.json and
  /// model.safetensors) instead of the random init; empty: random init.
  std::filesystem::path init_file{};
  /// The simulated timeline (docs/timeline.md): collectives cost alpha + bytes / busbw on `link`;
  /// compute is each rank's measured CPU time, scaled to `device` when one other than "cpu" is
  /// given. Never changes results.
  LinkPreset link = link_preset(kDefaultLink);
  /// Between the nodes of a world of several (--link-across): one NIC's link, priced by the
  /// timeline's plan_collective with `nics_per_node` of them a node.
  LinkPreset link_across = link_preset(kDefaultLinkAcross);
  /// NICs a node (--nics-per-node); 0: one per GPU.
  int nics_per_node = 0;
  /// Prices the host copies of offload (--host-link): latency + bytes / bandwidth each.
  HostLinkPreset host_link = host_link_preset(kDefaultHostLink);
  /// Prices the swap-file reads and writes of the NVMe tier (--disk-link): latency + bytes /
  /// bandwidth each.
  DiskLinkPreset disk_link = disk_link_preset(kDefaultDiskLink);
  std::optional<DevicePreset> device{};  ///< scale compute to this device (--device); none: CPU time
  /// Keep every rank's timeline program and events (for --trace and --what-if-world).
  bool record_timeline = false;
  /// Refuse, before allocating, a CPU run whose ranks cannot fit in the available host memory
  /// (run/memory_check.hpp); --no-memory-check turns it off.
  bool check_memory = true;
  /// Sim only: builds each rank's engine instead of make_engine (the exercises' grader plugs a
  /// learner's engines in here); empty: make_engine. The reference ignores it.
  EngineFactory engine_factory{};
};

/// Throws zl::Error with a one-line message naming the bad setting and what to use instead.
void validate(const TrainConfig& config);

/// True when the world has more than one node of more than one GPU (1 < gpus_per_node < world),
/// so that its reductions sum in two levels.
bool splits_into_nodes(const TrainConfig& config);

/// The nodes of the run and the links between them, as the timeline prices them: --gpus-per-node,
/// --link-across and --nics-per-node.
NodeLinks node_links(const TrainConfig& config);

/// True when ZeRO-1, 2 or 3 shards inside groups smaller than the world
/// (features.shard_group_ranks, `--shard-group node`): the stages' own engines with the shards in
/// each node (at stage 3, HSDP).
bool hybrid_sharded(const TrainConfig& config);

/// The engine as reports name it: engine_name, and for shards in groups of ranks the kind and
/// size ("zero3 hsdp, shard groups of 8", "zero2 hybrid, shard groups of 8", "zero3 hpz,
/// partitions of 8").
std::string engine_label(const TrainConfig& config);

/// The units of `config`'s model (the GPT's or the MLP's), checked (estimate.hpp's
/// checked_units).
std::vector<UnitSpec> model_units(const TrainConfig& config);

/// The ranks `config`'s engine lays its units out and shards its states for on a world of
/// `world`: a node's ranks for hybrid sharding (hybrid_sharded), else the world.
int state_shard_ranks(const TrainConfig& config, int world);

/// The threads each rank's CpuDevice runs on: config.threads, or with 0 the machine's cores
/// divided among the W ranks (as if they shared this machine, so MPI ranks on one node never
/// oversubscribe it), at least 1.
int run_threads(const TrainConfig& config);

}  // namespace zl
