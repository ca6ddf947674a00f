// memory_ledger.hpp — per-rank bytes by category, current and peak: the measured side of the
// ZeRO memory formulas. Every Buffer books itself here on allocation and releases on destruction.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace zl {

/// What an allocation holds. The model-state categories are the ones the ZeRO paper counts.
enum class MemCategory : std::uint8_t {
  Params,           ///< parameters in the training dtype (full or sharded)
  Grads,            ///< gradients (full or sharded)
  Master,           ///< fp32 master copy of parameters (mixed precision)
  Optimizer,        ///< Adam moments m and v
  Gathered,         ///< temporary full parameters of a unit (ZeRO-3)
  CommBuffer,       ///< staging buffers of collectives
  Activations,      ///< activations kept for backward
  HostMaster,       ///< fp32 master copy in host memory (ZeRO-Offload)
  HostOptimizer,    ///< Adam moments in host memory (ZeRO-Offload)
  HostGrads,        ///< fp32 gradient shard copied to host for the update (ZeRO-Offload)
  HostActivations,  ///< activation checkpoints kept in host memory (--cpu-checkpointing)
  HostParams,       ///< ZeRO-3 parameter shards in host memory (offload_param)
  NvmeMaster,       ///< fp32 master copy in a swap file on disk (ZeRO-Infinity)
  NvmeOptimizer,    ///< Adam moments in a swap file on disk (ZeRO-Infinity)
  NvmeParams,       ///< ZeRO-3 parameter shards in a swap file on disk (offload_param on nvme)
};

/// Number of MemCategory values.
inline constexpr int kMemCategoryCount = 15;

/// What an Activations buffer holds, for the ledger's breakdown of activation bytes.
enum class ActivationKind : std::uint8_t {
  Inputs,      ///< token ids and targets, or inputs and labels; the GPT's embedding output
  Block,       ///< saved per block or layer: LayerNorm outputs and statistics, qkv, residuals
  Attention,   ///< attention's per-row statistics (B x H x T x 2 per block), not its T x T
               ///< probabilities
  MlpHidden,   ///< the GPT MLP's 4C-wide values before and after GELU
  Logits,      ///< the final LayerNorm's output and the logits (their gradient written over them)
  Scratch,     ///< gradient scratch reused by every block or layer (and unlabelled buffers)
  Checkpoint,  ///< block inputs kept by activation checkpointing
  Recompute,   ///< tensors a checkpointed block rebuilds for its backward

};

/// Number of ActivationKind values.
inline constexpr int kActivationKindCount = 8;

/// Lower-case name of an activation kind as it appears in summaries ("inputs", "attention", ...).
std::string_view activation_kind_name(ActivationKind kind);

/// True for the categories that live in host memory (ZeRO-Offload); the rest are device memory.
/// On the sim backend both are the same RAM, booked apart so the ledgers show the split.
inline bool is_host(MemCategory category) {
  return category == MemCategory::HostMaster || category == MemCategory::HostOptimizer ||
         category == MemCategory::HostGrads || category == MemCategory::HostActivations ||
         category == MemCategory::HostParams;
}

/// True for the categories that live in files on disk (ZeRO-Infinity's NVMe tier): neither device
/// nor host memory, so no total counts them.
inline bool is_disk(MemCategory category) {
  return category == MemCategory::NvmeMaster || category == MemCategory::NvmeOptimizer ||
         category == MemCategory::NvmeParams;
}

/// Lower-case name of a category as it appears in summaries ("params", "grads", ...).
std::string_view mem_category_name(MemCategory category);

/// Current and peak bytes per category for one rank. Not thread-safe: one ledger per rank. Disk
/// categories (is_disk) have their own current and peak bytes and count in no total.
class MemoryLedger {
 public:
  /// Records `bytes` more in use under `category` (of kind `kind` when it is Activations).
  void book(MemCategory category, std::int64_t bytes,
            ActivationKind kind = ActivationKind::Scratch);
  /// Records `bytes` released under `category` (of kind `kind` when it is Activations).
  void release(MemCategory category, std::int64_t bytes,
               ActivationKind kind = ActivationKind::Scratch);
  /// Bytes in use now under `category`.
  std::int64_t current_bytes(MemCategory category) const { return current_[index(category)]; }
  /// Highest bytes ever in use under `category`.
  std::int64_t peak_bytes(MemCategory category) const { return peak_[index(category)]; }
  /// Device model-state bytes in use now, the ZeRO paper's model states: params + grads +
  /// master + optimizer (offload's host categories not included).
  std::int64_t model_state_bytes() const {
    return current_bytes(MemCategory::Params) + current_bytes(MemCategory::Grads) +
           current_bytes(MemCategory::Master) + current_bytes(MemCategory::Optimizer);
  }
  /// Activation bytes of `kind` in use now.
  std::int64_t activation_bytes(ActivationKind kind) const {
    return activations_[static_cast<int>(kind)];
  }
  /// Activation bytes of `kind` in use when the Activations category first reached its peak:
  /// the kinds add up to peak_bytes(MemCategory::Activations).
  std::int64_t activation_bytes_at_peak(ActivationKind kind) const {
    return activations_at_peak_[static_cast<int>(kind)];
  }
  /// Bytes in use now over all memory categories (device and host; disk is not memory).
  std::int64_t total_current_bytes() const { return total_current_; }
  /// Highest total bytes in use at any moment.
  std::int64_t total_peak_bytes() const { return total_peak_; }
  /// Bytes in use now over the device categories (those not is_host()).
  std::int64_t device_current_bytes() const { return device_current_; }
  /// Highest bytes in use at any moment over the device categories together: what the device
  /// must hold (at most the sum of their peaks, which need not coincide).
  std::int64_t device_peak_bytes() const { return device_peak_; }
  /// Bytes in use now over the host categories (is_host()).
  std::int64_t host_current_bytes() const { return total_current_ - device_current_; }
  /// Highest bytes in use at any moment over the host categories together.
  std::int64_t host_peak_bytes() const { return host_peak_; }

 private:
  static int index(MemCategory category) { return static_cast<int>(category); }
  std::array<std::int64_t, kMemCategoryCount> current_{};
  std::array<std::int64_t, kMemCategoryCount> peak_{};
  std::array<std::int64_t, kActivationKindCount> activations_{};
  std::array<std::int64_t, kActivationKindCount> activations_at_peak_{};
  std::int64_t total_current_ = 0;
  std::int64_t total_peak_ = 0;
  std::int64_t device_current_ = 0;
  std::int64_t device_peak_ = 0;
  std::int64_t host_peak_ = 0;
};

}  // namespace zl
