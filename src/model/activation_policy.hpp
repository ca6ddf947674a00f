// activation_policy.hpp — which GPT blocks keep what they computed in forward and which rebuild it
// in backward (activation checkpointing, `--activation-checkpointing`). Recomputing runs the same
// kernels on the same inputs and parameters, so the rebuilt tensors, and everything trained from
// them, are bitwise the stored ones: a policy changes memory and time, never results.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace zl {

/// What a checkpointed block keeps from forward.
enum class Recompute : std::uint8_t {
  None,       ///< keep every tensor backward needs
  Full,       ///< keep the block's output only (the next block's input); rebuild the rest
  Selective,  ///< keep the matrix products' outputs (qkv, mid, c_fc's); rebuild the LayerNorms,
              ///< attention's softmax core and GELU, the cheap and memory-heavy parts
};

/// A model's activation checkpointing: which blocks recompute, and how much.
struct ActivationPolicy {
  Recompute recompute = Recompute::None;  ///< what a checkpointed block keeps
  /// Full only: blocks 0, K, 2K, ... are checkpointed, the others keep everything (every:K);
  /// 1 checkpoints every block.
  int every_blocks = 1;
  /// Full only (--cpu-checkpointing, DeepSpeed's cpu_checkpointing): the kept block outputs live
  /// in host memory (MemCategory::HostActivations) instead of the device's.
  bool cpu_checkpoints = false;

  /// True when block `layer` (0-based) rebuilds tensors in backward.
  bool recomputes(int layer) const {
    return recompute != Recompute::None && layer % every_blocks == 0;
  }
  /// Equal policies keep and rebuild the same tensors.
  bool operator==(const ActivationPolicy&) const = default;
};

/// "none", "full", "every:K" or "selective": what parse_activation_policy() reads back.
std::string activation_policy_name(const ActivationPolicy& policy);

/// Parses "none", "full", "every:K" (K >= 1; every:1 is full) or "selective"; throws zl::Error
/// naming `flag` and the accepted spellings otherwise.
ActivationPolicy parse_activation_policy(std::string_view text,
                                         std::string_view flag = "--activation-checkpointing");

}  // namespace zl
