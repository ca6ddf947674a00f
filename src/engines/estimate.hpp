// estimate.hpp — per-GPU model-state memory of DDP and ZeRO-1/2/3, in two views.
// The paper's view (estimate_paper.hpp, included here): Ψ parameters, N ranks, params + grads + K
// optimizer bytes per parameter (EstimateConfig -> StageEstimate).
// The engines' view (EstimateOptions -> LedgerEstimate): the bytes each MemCategory of one rank's
// ledger holds, counted from the model's units padded as partition.hpp pads them (Ψp), with the
// training precision (fp32 master copy when bf16/fp16), gradient accumulation and ZeRO-3's
// persistent units. With mixed precision both views give DeepSpeed's 16Ψ, 4Ψ + 12Ψ/N,
// 2Ψ + 14Ψ/N and 16Ψ/N; the engines' view adds the padding and the persistent units.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/dtype.hpp"
#include "engines/engine.hpp"
#include "engines/estimate_paper.hpp"
#include "model/gpt_config.hpp"
#include "model/mlp.hpp"

namespace zl {

// ---- The engines' view: what each ledger category holds ----------------------------------------

/// Where offloaded model states live (ZeRO-Offload's host memory, ZeRO-Infinity's NVMe).
enum class OffloadTier {
  None,  ///< on the device
  Cpu,   ///< in host memory
  Nvme,  ///< in a swap file on the disk
};

/// "none", "cpu" or "nvme", as DeepSpeed's offload "device" values.
std::string_view offload_tier_name(OffloadTier tier);

/// Parses "none", "cpu" or "nvme" for `flag`; throws zl::Error naming the accepted values.
OffloadTier parse_offload_tier(std::string_view name, std::string_view flag);

/// The training features that change model-state memory, named and defaulted as in
/// TrainingFeatures, plus the optimizer's state per parameter.
struct EstimateOptions {
  /// Dtype of parameters and gradients: F32, or BF16/F16 with an fp32 master copy.
  DType precision = DType::F32;
  /// Micro-batches per optimizer step; above 1, DDP and ZeRO-1 hold a gradient accumulator.
  std::int64_t grad_accum_steps = 1;
  /// ZeRO-3 keeps each unit with fewer (unpadded) elements than this whole on every rank.
  std::int64_t persistence_threshold_elems = TrainingFeatures{}.persistence_threshold_elems;
  /// Optimizer state per parameter, besides the master copy: AdamW's fp32 m and v, 8 bytes.
  int optimizer_bytes_per_param = 8;
  /// Where the master and the optimizer state live (offload_optimizer); offloaded, there is
  /// always an fp32 master, fp32 training too.
  OffloadTier optimizer_tier = OffloadTier::None;
  /// Where ZeRO-3 keeps its parameter shards (offload_param): None or Cpu; the units it keeps
  /// whole stay on the device. Stages 0-2 keep their parameters on the device.
  OffloadTier param_tier = OffloadTier::None;
  /// ZeRO-3 with ZeRO++'s hpZ: each rank also holds a secondary shard of the parameters, Ψp/K in
  /// the training dtype, among this many ranks (zero_hpz_partition_size); 0 or 1: none.
  int hpz_partition_ranks = 0;
  /// Parameters on NVMe: the swap buffers in host memory (offload_param.buffer_count), each the
  /// largest shard on disk but at most param_buffer_elems (buffer_size) elements.
  int param_buffer_count = TrainingFeatures{}.param_buffer_count;
  /// Parameters on NVMe: elements a swap buffer holds at most (offload_param.buffer_size).
  std::int64_t param_buffer_elems = TrainingFeatures{}.param_buffer_elems;
  /// Parameters on NVMe: elements of shards kept in host memory, the units in order while they
  /// fit (offload_param.max_in_cpu; a bare count is one piece).
  std::int64_t param_max_in_cpu_elems = TrainingFeatures{}.param_max_in_cpu_elems;
};

/// The options `features` trains with (AdamW's 8 optimizer bytes per parameter).
EstimateOptions estimate_options(const TrainingFeatures& features);

/// Throws zl::Error with a one-line message naming the flag if an option is out of range
/// (precision not fp32/bf16/fp16, grad_accum_steps < 1, threshold < 0, optimizer bytes < 1,
/// parameters on NVMe, which the engines do not offer).
void validate(const EstimateOptions& options);

/// Bytes per element of parameters and gradients: 4 for F32, 2 for BF16 and F16.
int training_bytes_per_param(DType precision);

/// Bytes per parameter of the fp32 master copy: 4 for BF16 and F16, 0 for F32 (none).
int master_bytes_per_param(DType precision);

/// The element counts the bytes are made of: what one rank holds of a whole term and of a
/// sharded one, and what ZeRO-3 keeps whole.
struct StateElems {
  int world = 1;                      ///< N
  std::int64_t params = 0;            ///< Ψ, the model's real parameters
  /// A whole term: Ψp (units padded, and GPT-2's wte rows past the vocabulary) or Ψ (a bare count).
  std::int64_t replica_elems = 0;
  std::int64_t shard_elems = 0;       ///< S, a sharded term: Ψp/N, or ceil(Ψ/N) for a bare Ψ
  std::int64_t persistent_elems = 0;  ///< Ψw, padded elements of the units ZeRO-3 keeps whole
  std::int64_t persistent_units = 0;  ///< how many units those are
  std::int64_t units = 0;             ///< units counted (0 for a bare count)
  /// Elements of padded rows in Ψp (GPT-2's wte rows past the vocabulary; 0 for the MLP).
  std::int64_t padded_row_elems = 0;
  /// Each unit's shard (Ψp/N of it), 0 for the units ZeRO-3 keeps whole: what offload_param
  /// places unit by unit. Empty for a bare count.
  std::vector<std::int64_t> unit_shard_elems;
  std::int64_t padding_elems() const { return replica_elems - params; }  ///< Ψp - Ψ
  bool padded() const { return units > 0; }  ///< counted from units: formulas say Ψp
};

/// A bare parameter count Ψ: no units, so no padding and nothing persistent. Throws zl::Error
/// if Ψ < 1 or N < 1.
StateElems state_elems(std::int64_t params, int world);

/// `units` laid out for `world` ranks as layout_units() does (each padded to a multiple of
/// N * kNormBlockElems); units with numel < options.persistence_threshold_elems are persistent.
/// Throws zl::Error if there are no units, N < 1, or a count overflows int64.
StateElems state_elems(const std::vector<UnitSpec>& units, int world,
                       const EstimateOptions& options);

/// One rank's model-state bytes at one stage, by ledger category: what the engines allocate.
/// The device's categories first; offloaded state is booked in host or NVMe categories instead
/// (while it rests: an NVMe unit is in host memory only during its update).
struct LedgerEstimate {
  int stage = 0;                      ///< 0 (DDP), 1, 2 or 3
  std::int64_t params_bytes = 0;      ///< MemCategory::Params
  std::int64_t grads_bytes = 0;       ///< MemCategory::Grads, the accumulator included
  std::int64_t grad_accum_bytes = 0;  ///< of grads_bytes, the accumulator (DDP and ZeRO-1)
  std::int64_t master_bytes = 0;      ///< MemCategory::Master (bf16/fp16 only)
  std::int64_t optimizer_bytes = 0;   ///< MemCategory::Optimizer
  std::int64_t host_params_bytes = 0;     ///< MemCategory::HostParams (ZeRO-3 offload_param)
  std::int64_t host_master_bytes = 0;     ///< MemCategory::HostMaster (optimizer on cpu)
  std::int64_t host_optimizer_bytes = 0;  ///< MemCategory::HostOptimizer (optimizer on cpu)
  std::int64_t nvme_master_bytes = 0;     ///< MemCategory::NvmeMaster (optimizer on nvme)
  std::int64_t nvme_optimizer_bytes = 0;  ///< MemCategory::NvmeOptimizer (optimizer on nvme)
  std::int64_t nvme_params_bytes = 0;     ///< MemCategory::NvmeParams (ZeRO-3 offload_param nvme)
  /// The host's terms, as `formula` writes the device's ("" when none).
  std::string host_formula;
  /// The disk's terms, as `formula` writes the device's ("" when none).
  std::string disk_formula;
  /// Category by category, params + grads (+ accumulator) + master + optimizer, in Ψp for units
  /// (Ψ for a bare count), Ψw for the persistent units: "2Ψp + 2Ψp/N + 4Ψp/N + 8Ψp/N".
  std::string formula;
  /// The same sum collected: "2Ψp + 14Ψp/N", "16Ψp/N + 2Ψw(N-1)/N".
  std::string total_formula;
  /// params + grads + master + optimizer: the device's bytes.
  std::int64_t total_bytes() const {
    return params_bytes + grads_bytes + master_bytes + optimizer_bytes;
  }
  /// What rests in host memory: params, master and optimizer state there.
  std::int64_t host_bytes() const {
    return host_params_bytes + host_master_bytes + host_optimizer_bytes;
  }
  /// What rests on the disk: the NVMe master and optimizer state, and parameter shards.
  std::int64_t disk_bytes() const {
    return nvme_master_bytes + nvme_optimizer_bytes + nvme_params_bytes;
  }
};

/// Per-rank ledger bytes at `stage` (0..3): precision, accumulation and optimizer bytes from
/// `options`, the persistent units from `elems` (counted by state_elems). Validates `options`;
/// throws zl::Error if the bytes overflow int64.
LedgerEstimate estimate_ledger(const StateElems& elems, const EstimateOptions& options, int stage);

/// Stages 0, 1, 2 and 3 in order.
std::vector<LedgerEstimate> estimate_ledgers(const StateElems& elems,
                                             const EstimateOptions& options);

// ---- What fits: the memory wall -----------------------------------------------------------------

/// The bytes one rank may keep on its device, in host memory and on disk (its share of a node's).
struct PlaceBudget {
  std::int64_t device_bytes = 0;  ///< one GPU's memory
  std::int64_t host_bytes = 0;    ///< the host memory one GPU's rank may use
  std::int64_t disk_bytes = 0;    ///< the disk one GPU's rank may use
};

/// The largest Ψ (a bare count on `world` ranks) whose model states at `stage`, placed as
/// `options` places them, fit `budget`: estimate_ledger's device, host and disk bytes each within
/// its budget (activations and working buffers not counted); 0 when one parameter does not fit.
std::int64_t largest_fitting_params(int world, const EstimateOptions& options, int stage,
                                    const PlaceBudget& budget);

// ---- Models ------------------------------------------------------------------------------------

/// Most layers (MLP) or blocks (GPT) a model to estimate may have: more units than this would
/// not fit in memory as UnitSpecs, and no real model has them.
inline constexpr std::int64_t kMaxEstimateLayers = 1'000'000;

/// zl::Mlp's units for `config`; throws zl::Error if a size is < 1, there are more than
/// kMaxEstimateLayers layers, or the count could overflow int64.
std::vector<UnitSpec> checked_units(const MlpConfig& config);

/// gpt_units(config); throws zl::Error if validate(config) fails, there are more than
/// kMaxEstimateLayers blocks, or the count could overflow int64.
std::vector<UnitSpec> checked_units(const GptConfig& config);

/// Ψ of the MLP, counted from zl::Mlp's units; throws as checked_units does.
std::int64_t mlp_param_count(const MlpConfig& config);

}  // namespace zl
