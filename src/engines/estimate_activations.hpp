// estimate_activations.hpp — one rank's activation bytes for one micro-batch, counted from the
// shapes the models book as Activations when a micro-batch begins (Gpt::begin, Mlp::begin), by
// what they hold. Activations are not sharded by any stage, so the bytes depend only on the model,
// the micro-batch, the context, the activation checkpointing policy and, for the GPT, the
// precision (under bf16/fp16 its matrix products' inputs and outputs are kept in 16 bits; the MLP
// keeps fp32 at every precision).
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/memory_ledger.hpp"
#include "model/activation_policy.hpp"
#include "model/gpt_config.hpp"
#include "model/mlp.hpp"

namespace zl {

/// Activation bytes of one micro-batch on one rank, by kind: the ledger's
/// MemoryLedger::activation_bytes_at_peak, kind by kind; total_bytes() is the Activations
/// category's peak (`--summary`'s ranks[i].bytes.peak.activations).
struct ActivationEstimate {
  /// Bytes of each ActivationKind (indexed by its value), in device memory.
  std::array<std::int64_t, kActivationKindCount> bytes{};
  /// Checkpoints kept in host memory with the policy's cpu_checkpoints (MemCategory::
  /// HostActivations); not in `bytes` or total_bytes().
  std::int64_t host_bytes = 0;
  /// The sum in the model's symbols, e.g. "16BT + 4[L(16BTC + 4BT + 2BHT) + 16BTC + 2BT + BTVp]"
  /// (Vp: the padded vocabulary, padded_vocab()).
  std::string formula;
  /// Bytes of `kind`.
  std::int64_t bytes_of(ActivationKind kind) const { return bytes[static_cast<int>(kind)]; }
  /// Every kind added up.
  std::int64_t total_bytes() const;
};

/// The GPT's activations for a micro-batch of `micro_batch` sequences of `seq_len` tokens
/// (B and T; T <= config.block_size), its blocks checkpointed as `policy` says: a rebuilt
/// block keeps its output (Checkpoint) or, selective, its matrix products' outputs, and one
/// block's worth of the rest is booked as Recompute. With a 16-bit `activation_dtype` (the
/// run's precision) the matrix products' inputs and outputs are kept (and rebuilt) in 16 bits (see
/// Gpt). Throws zl::Error
/// naming the size if B or T is out of range or the bytes overflow int64.
ActivationEstimate estimate_activations(const GptConfig& config, std::int64_t micro_batch,
                                        std::int64_t seq_len, const ActivationPolicy& policy = {},
                                        DType activation_dtype = DType::F32);

/// The MLP's activations for a micro-batch of `micro_batch` rows. Throws zl::Error if B < 1 or
/// the bytes overflow int64.
ActivationEstimate estimate_activations(const MlpConfig& config, std::int64_t micro_batch);

}  // namespace zl
