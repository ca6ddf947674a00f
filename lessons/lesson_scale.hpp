// lesson_scale.hpp — what a lesson's toy says about real models: GPT-2 124M and 1.5B, counted
// from their units and padded as the engines pad them, and a bare 7B, on 8 and 64 GPUs in bf16
// with an fp32 master and Adam (engines/estimate.hpp's ledger view).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engines/estimate.hpp"

namespace zl::lessons {

/// A model at real scale: a GPT whose units are counted and padded, or a bare parameter count.
struct RealModel {
  std::string name;              ///< "GPT-2 124M", ...
  std::optional<GptConfig> gpt;  ///< the GPT's shape, or none for a bare count
  std::int64_t params = 0;       ///< Ψ, for a bare count (a GPT's is counted from its units)
};

/// GPT-2 124M ("gpt2"), GPT-2 1.5B ("gpt2-xl": 48 blocks, 25 heads, 1,600 channels) and a bare
/// Ψ of 7,000,000,000.
std::vector<RealModel> real_models();

/// The worlds every real-scale table shows: 8 and 64 GPUs.
inline constexpr std::array<int, 2> kRealWorlds = {8, 64};

/// The model's elements on `world` ranks: units padded to a multiple of world·64 for a GPT.
StateElems real_elems(const RealModel& model, int world);

/// The options every real-scale table uses: bf16 parameters and gradients, an fp32 master copy
/// and AdamW's fp32 m and v (2 + 2 + 4 + 8 bytes per parameter).
EstimateOptions real_options();

/// "1.99" for 1.99e9 bytes.
std::string gb_text(std::int64_t bytes);

/// Heads a real-scale section and prints one row per model and world: Ψ, the padding the
/// engines add, and each of `stages`' per-GPU model-state GB (params + grads + master + Adam).
/// Returns the largest padding of a row, as a percent of its Ψ.
double print_real_memory(std::span<const int> stages);

}  // namespace zl::lessons
