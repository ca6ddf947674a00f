// engine.hpp — the interface every data-parallel engine implements (reference, DDP, and ZeRO
// stages 1-3), what they report per step, and the full-state view tests compare bit for bit.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "comm/comm.hpp"
#include "comm/reduce.hpp"
#include "core/error.hpp"
#include "core/io_queue.hpp"
#include "model/model.hpp"
#include "ops/device.hpp"
#include "optim/adamw.hpp"
#include "optim/loss_scaler.hpp"
#include "optim/lr_schedule.hpp"

namespace zl {

/// The engines. Stage numbers follow DeepSpeed: DDP is stage 0.
enum class EngineKind { Reference, Ddp, Zero1, Zero2, Zero3 };

/// "reference", "ddp", "zero1", "zero2" or "zero3".
std::string_view engine_name(EngineKind kind);

/// The engine of ZeRO stage 0 (DDP), 1, 2 or 3; throws zl::Error for any other number.
EngineKind engine_of_stage(int stage);

/// The ZeRO stage of a distributed engine (DDP is 0); throws zl::Error for the reference.
int stage_of(EngineKind kind);

/// The micro-batch that rank `rank` uses at micro-step `micro_step` (0-based): optimizer step t's
/// k-th accumulated micro-batch is micro-step t * grad_accum_steps + k.
using BatchFn = std::function<Batch(std::int64_t micro_step, int rank)>;

/// A moment inside a step, for narration: `phase` names the step ("forward", "backward",
/// "reduce_scatter", "update", "all_gather", "gather", "release", ...), `unit` the unit or -1.
struct EngineEvent {
  std::string_view phase;  ///< a string literal naming the step; valid for the program's life
  int unit = -1;           ///< index into Model::units(), or -1 for an event of the whole model
};

/// Called on the rank's own thread at each event, with that rank's memory ledger at that moment.
using EngineObserver = std::function<void(const EngineEvent&, const MemoryLedger&)>;

/// What a step does when its gradient norm is NaN or infinite. The canonical norm has the same
/// bits on every rank and in the reference, so all of them decide alike.
enum class NonFinitePolicy : std::uint8_t {
  Stop,  ///< throw NonFiniteError before the update (the default)
  Skip,  ///< skip the update: parameters, Adam moments and Adam's step count stay as they were
};

/// The training features of a DeepSpeed config, with DeepSpeed's defaults. Every engine and the
/// reference honour all of them and stay bitwise equal to each other.
struct TrainingFeatures {
  /// Dtype of parameters and gradients, held and communicated: F32, or BF16/F16 with fp32 master
  /// weights and Adam state (bf16.enabled, fp16.enabled).
  DType precision = DType::F32;
  /// fp16's dynamic loss scaling (used only when precision is F16).
  LossScaleConfig loss_scale{};
  /// Micro-batches per optimizer step (gradient_accumulation_steps).
  std::int64_t grad_accum_steps = 1;
  /// Clip the global gradient norm to this (gradient_clipping); 0 turns clipping off.
  double grad_clip = 0.0;
  /// Largest collective call for gradients, in elements (reduce_bucket_size).
  std::int64_t reduce_bucket_elems = 500'000'000;
  /// Largest collective call for parameters, in elements (allgather_bucket_size).
  std::int64_t allgather_bucket_elems = 500'000'000;
  /// ZeRO-3: elements of the units gathered ahead of the one running
  /// (stage3_prefetch_bucket_size); 0 gathers each unit only when it runs. zerolab's default is
  /// 0 (DeepSpeed's is 5e7) so that ZeRO-3 holds one gathered unit at a time unless asked.
  std::int64_t prefetch_bucket_elems = 0;
  /// ZeRO-3: units with fewer elements than this stay whole on every rank
  /// (stage3_param_persistence_threshold). zerolab's default is 0 (DeepSpeed's is 1e5) so that
  /// ZeRO-3 shards every unit, as the textbook stage does, unless asked.
  std::int64_t persistence_threshold_elems = 0;
  /// ZeRO-3 only: the ranks of each group that shards (FSDP's HYBRID_SHARD shard group, zerolab's
  /// `--shard-group node`): consecutive groups of this many ranks each shard the model as ZeRO-3
  /// does among them, and the groups hold replicas of each other (make_zero3_engine). 0, or the
  /// world: one group, ZeRO-3 itself.
  int shard_group_ranks = 0;
  /// ZeRO-3 only: ZeRO++'s hierarchical partitioning (zero_hpz_partition_size): besides its
  /// primary shard each rank keeps a secondary one, its slice of each unit cut among this many
  /// consecutive ranks (a node), which backward gathers from instead of the world
  /// (make_zeropp_engine). 0 or 1: off.
  int hpz_partition_ranks = 0;
  /// ZeRO-3 only: ZeRO++'s qwZ (zero_quantized_weights): parameter gathers from the world move
  /// int8 codes of blocks of 256 values and their scales (make_zeropp_engine). Not bitwise: the
  /// gathered values are within the quantizer's bound of the shards' (comm/quantize.hpp).
  bool quantized_weights = false;
  /// ZeRO-3 only: ZeRO++'s qgZ (zero_quantized_gradients): the gradient reduce is two all_to_alls
  /// of int4 codes, inside each node of node_ranks ranks and then across the nodes
  /// (make_zeropp_engine). Not bitwise, as quantized_weights.
  bool quantized_gradients = false;
  /// The ranks of a node (the launcher's local world size, --gpus-per-node) where an engine sums
  /// by link level: qgZ's first all_to_all stays inside it. 0: the world is one node. A run sets
  /// it from TrainConfig::gpus_per_node when it makes the engines' options.
  int node_ranks = 0;
  /// Start gradient reductions (and ZeRO-3's prefetch gathers) as async collectives, so they run
  /// while backward goes on (zero_optimization.overlap_comm). Never changes results.
  bool overlap_comm = false;
  /// Keep the fp32 master and Adam state of the own shard in host memory and run the update
  /// there (zero_optimization.offload_optimizer.device = "cpu"). Never changes results.
  bool offload_optimizer = false;
  /// With offload_optimizer: keep that state in a swap file in this folder instead, bringing each
  /// unit's part into host memory only for its update (ZeRO-Infinity's NVMe tier;
  /// offload_optimizer.device = "nvme" with its nvme_path). Empty: host memory. Never changes
  /// results.
  std::string nvme_path;
  /// ZeRO-3: keep the own parameter shards in host memory; each gather copies the unit's shard to
  /// the device first (zero_optimization.offload_param.device = "cpu"). Units below the
  /// persistence threshold stay on the device; the other engines hold no parameter shards and
  /// ignore it. Never changes results.
  bool offload_param = false;
  /// With offload_param: keep those shards in a swap file in this folder instead, bringing each
  /// unit's into host memory only for a gather or the update (ZeRO-Infinity's NVMe tier;
  /// offload_param.device = "nvme" with its nvme_path). Needs offload_optimizer (the update then
  /// runs from the master, and the parameters are its rounding). Empty: host memory. Never
  /// changes results.
  std::string param_nvme_path;
  /// With param_nvme_path: the swap buffers in host memory the shards on disk pass through
  /// (offload_param.buffer_count). One holds the unit in use; the others read the next units'
  /// shards ahead of their gathers and updates, and let updated shards go out while the next
  /// update runs. 1: every read and write waits. Never changes results.
  int param_buffer_count = 5;
  /// With param_nvme_path: elements of a swap buffer, at most (offload_param.buffer_size); every
  /// unit's shard on disk must fit one. A buffer takes the largest such shard, no more. Never
  /// changes results.
  std::int64_t param_buffer_elems = 100'000'000;
  /// With param_nvme_path: elements of parameter shards kept in host memory instead of on disk,
  /// the units in order while they fit (offload_param.max_in_cpu); from the first that does not,
  /// every shard is on disk. zerolab's flags default to 0 (every shard on disk); a DeepSpeed
  /// config without the key gets DeepSpeed's 1e9. Never changes results.
  std::int64_t param_max_in_cpu_elems = 0;
  /// How the swap files of nvme_path and param_nvme_path move their bytes (DeepSpeed's `aio`:
  /// block size, queue depth, threads, io_uring or a thread pool). Never changes results.
  AioSettings aio{};
  /// With nvme_path: read the next unit's master and moments while the current one updates
  /// (offload_optimizer.pipeline_read). Never changes results.
  bool pipeline_read = false;
  /// With nvme_path: write a unit's master and moments back while the next one updates
  /// (offload_optimizer.pipeline_write). Never changes results.
  bool pipeline_write = false;
  /// With pipeline_read or pipeline_write: the units whose master and moments may be in host
  /// memory at once, the updating one, the one coming in and those going out
  /// (offload_optimizer.buffer_count; at least 3 with both, 2 with one).
  int swap_buffer_count = 4;
};

/// Throws zl::Error naming the setting (by its DeepSpeed key) if a value is out of range.
void validate(const TrainingFeatures& features);

/// Throws zl::Error naming the key and the flag unless offload_param's buffer_count is 1 to 1024,
/// buffer_size 1 or more and max_in_cpu 0 or more (TrainingFeatures::param_buffer_count, ...).
void validate_param_buffers(int buffer_count, std::int64_t buffer_elems,
                            std::int64_t max_in_cpu_elems);

/// For hybrid sharding (ZeRO-1, 2 or 3 in shard groups): throws zl::Error when
/// features.shard_group_ranks does not divide `world`.
void validate_shard_group(const TrainingFeatures& features, int world);

/// For the ZeRO++ engine (make_zeropp_engine): throws zl::Error when features.hpz_partition_ranks
/// does not divide `world`, or with a shard group.
void validate_zeropp(const TrainingFeatures& features, int world);

/// True when ZeRO-3 runs as ZeRO++ (make_zeropp_engine): hpZ with a partition of 2 ranks or more,
/// qwZ or qgZ.
bool uses_zeropp(const TrainingFeatures& features);

/// The engine as logs and reports name it: "zero3", "zero2 hybrid, shard groups of 4",
/// "zero3 hsdp, shard groups of 4", "zero3 hpz, partitions of 8, qwz (int8 weights)", ... for
/// `kind` training `features` on `world` ranks.
std::string engine_label(EngineKind kind, const TrainingFeatures& features, int world);

/// What every engine needs besides the model, the device and (for the distributed ones) a Comm.
struct EngineOptions {
  AdamWConfig adamw;        ///< optimizer hyperparameters, the same on every rank
  LrSchedule lr_schedule{};  ///< the lr (and OneCycle's betas) of each update; default: constant
  std::uint64_t seed = 0;   ///< parameter init seed
  BatchFn batch;            ///< data source
  EngineObserver observer;  ///< optional narration hook (lessons); never changes results
  NonFinitePolicy nonfinite = NonFinitePolicy::Stop;  ///< steps with a NaN or infinite norm
  TrainingFeatures features{};                        ///< precision, accumulation, clipping, ...
};

/// What one optimizer step reports.
struct StepStats {
  /// The logged loss: the mean over the W ranks (and the accumulated micro-batches) of the
  /// micro-batch losses, the same on every rank. Distributed engines average it with one
  /// all_reduce after backward (mean_loss_over_ranks); the reference averages its W losses.
  float loss = 0.0f;
  /// Canonical L2 norm of the averaged gradients (optim/grad_norm.hpp); the same on every rank.
  double grad_norm = 0.0;
  /// True when the norm was not finite and NonFinitePolicy::Skip skipped the update.
  bool skipped = false;
  /// The loss scale this step's backward multiplied the loss by (fp16's; 1 otherwise).
  double loss_scale = 1.0;
  /// The learning rate of this step's update (for a skipped step, the one it would have used;
  /// the schedule stays where it was).
  double lr = 0.0;
};

/// Thrown by step() under NonFinitePolicy::Stop, on every rank at the same step, before anything
/// is updated: "step 7: gradient norm is nan: lower --lr or check the data; --skip-nonfinite
/// skips such steps" (steps counted from 1, as the progress lines show them).
class NonFiniteError : public Error {
 public:
  /// `step` is 0-based, as Engine::step() takes it.
  NonFiniteError(std::int64_t step, double grad_norm);
  /// The 0-based step.
  std::int64_t step() const { return step_; }

 private:
  std::int64_t step_;
};

/// Full, unpadded model state, one flat vector per unit (parameters back to back, as in UnitSpec).
/// Parameters are fp32: the master in 16-bit training.
struct ModelState {
  std::vector<std::vector<float>> params;      ///< per unit: numel fp32 parameters
  std::vector<std::vector<float>> exp_avg;     ///< per unit: Adam's first moment, same sizes
  std::vector<std::vector<float>> exp_avg_sq;  ///< per unit: Adam's second moment, same sizes
};

/// One rank's shard of every unit under the shared partition (shard_elems each, padding
/// included): the same elements whatever the stage and precision, which is what checkpoints
/// store. Parameters are the fp32 master in 16-bit training (the 16-bit ones are its rounding).
struct ShardState {
  std::vector<std::vector<float>> params;      ///< per unit: shard_elems fp32 parameters
  std::vector<std::vector<float>> exp_avg;     ///< per unit: the shard of Adam's first moment
  std::vector<std::vector<float>> exp_avg_sq;  ///< per unit: the shard of Adam's second moment
  /// AdamW updates applied so far (the same on every rank): bias correction counts these, not
  /// steps, since a step skipped for a non-finite norm does not count. Checkpoints store it.
  std::int64_t adam_updates = 0;
  /// fp16's loss scaler (the same on every rank); absent: the engine keeps its own.
  std::optional<LossScalerState> scaler{};
};

/// One rank's engine. step() and full_state() are collective on distributed engines: every rank
/// calls them in the same order.
class Engine {
 public:
  virtual ~Engine() = default;
  /// Runs optimizer step `step` (0-based): forward, backward, reduce, update.
  virtual StepStats step(std::int64_t step) = 0;
  /// The whole model state, assembled from shards where the engine shards it, on world rank 0;
  /// the other ranks take part in the gathers and may return it empty (W ranks in one process
  /// would otherwise hold W copies of the model).
  virtual ModelState full_state() = 0;
  /// This rank's shard of parameters and Adam moments (no communication).
  virtual ShardState shard_state() = 0;
  /// Replaces parameters and Adam moments with `state` (this rank's shards); engines that hold
  /// more than their shard all-gather the rest. Collective.
  virtual void load_shard_state(const ShardState& state) = 0;
};

/// One process playing all `world` ranks: W micro-batch gradients, their rank-order average
/// (in two levels when `gpus_per_node` splits the world into nodes, as the collectives sum:
/// comm/reduce.hpp), one AdamW over the whole model. The answer key for every other engine.
std::unique_ptr<Engine> make_reference_engine(Model& model, Device& device, int world,
                                              const EngineOptions& options,
                                              int gpus_per_node = kOneNode);

/// DDP: full replica on every rank; gradients all-reduced (avg) unit by unit; full AdamW.
std::unique_ptr<Engine> make_ddp_engine(Model& model, Device& device, Comm& comm,
                                        const EngineOptions& options);

/// ZeRO-1: optimizer state sharded; gradients reduce-scattered after backward; AdamW on the own
/// shard; parameters all-gathered.
std::unique_ptr<Engine> make_zero1_engine(Model& model, Device& device, Comm& comm,
                                          const EngineOptions& options);

/// ZeRO-2: as ZeRO-1, with gradients reduce-scattered during backward unit by unit; only the
/// own gradient shard persists.
std::unique_ptr<Engine> make_zero2_engine(Model& model, Device& device, Comm& comm,
                                          const EngineOptions& options);

/// ZeRO-3: parameters sharded too; each unit is gathered just before it runs (forward and
/// backward) and released right after. With features.shard_group_ranks smaller than the world,
/// hybrid sharding (FSDP's HYBRID_SHARD, HSDP): ZeRO-3 inside each group of that many consecutive
/// ranks (a node), the groups replicas of each other; splits `comm` into the groups
/// (Comm::split) and throws zl::Error when the group does not divide the world.
std::unique_ptr<Engine> make_zero3_engine(Model& model, Device& device, Comm& comm,
                                          const EngineOptions& options);

/// ZeRO++: ZeRO-3 with hpZ (backward gathers each unit from the secondary shards of
/// features.hpz_partition_ranks consecutive ranks, a node, which the forward gather fills), qwZ
/// (int8 parameter gathers) and qgZ (int4 gradient all_to_alls inside, then across the nodes),
/// each as the features ask. Splits `comm` into the groups (Comm::split). Throws zl::Error as
/// validate_zeropp does.
std::unique_ptr<Engine> make_zeropp_engine(Model& model, Device& device, Comm& comm,
                                           const EngineOptions& options);

/// The distributed engine of `kind` (not Reference): for Zero3, ZeRO++ where uses_zeropp() says
/// so.
std::unique_ptr<Engine> make_engine(EngineKind kind, Model& model, Device& device, Comm& comm,
                                    const EngineOptions& options);

/// Builds one rank's distributed engine of a kind, as make_engine does: how another
/// implementation of the same stage (a learner's exercise engine) takes make_engine's place.
using EngineFactory = std::function<std::unique_ptr<Engine>(
    EngineKind kind, Model& model, Device& device, Comm& comm, const EngineOptions& options)>;

}  // namespace zl
