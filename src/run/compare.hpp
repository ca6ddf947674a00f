// compare.hpp — bitwise comparison of two runs (model states, per-step losses and norms) that
// reports the first differing element with both values: how tests and lessons check an engine
// against the reference.
#pragma once

#include <fmt/format.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "run/train.hpp"

namespace zl {

/// True when `a` and `b` hold the same bits: a NaN equals only a NaN of the same payload, and 0
/// and -0 differ.
inline bool same_bits(float a, float b) {
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}
/// The same for doubles.
inline bool same_bits(double a, double b) {
  return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b);
}

/// Empty when `a` and `b` hold the same bits; otherwise where and how they first differ.
inline std::optional<std::string> first_difference(const std::string& what,
                                                   const std::vector<std::vector<float>>& a,
                                                   const std::vector<std::vector<float>>& b) {
  if (a.size() != b.size()) return fmt::format("{}: {} units vs {}", what, a.size(), b.size());
  for (std::size_t u = 0; u < a.size(); ++u) {
    if (a[u].size() != b[u].size()) {
      return fmt::format("{} unit {}: {} elements vs {}", what, u, a[u].size(), b[u].size());
    }
    for (std::size_t i = 0; i < a[u].size(); ++i) {
      if (!same_bits(a[u][i], b[u][i])) {
        return fmt::format("{} unit {} element {}: {:.9g} vs {:.9g}", what, u, i, a[u][i], b[u][i]);
      }
    }
  }
  return std::nullopt;
}

/// Empty when both runs' final states and per-step losses and norms are bitwise equal.
inline std::optional<std::string> first_difference(const TrainResult& a, const TrainResult& b) {
  if (auto diff = first_difference("params", a.final_state.params, b.final_state.params))
    return diff;
  if (auto diff = first_difference("exp_avg", a.final_state.exp_avg, b.final_state.exp_avg))
    return diff;
  if (auto diff =
          first_difference("exp_avg_sq", a.final_state.exp_avg_sq, b.final_state.exp_avg_sq)) {
    return diff;
  }
  if (a.steps.size() != b.steps.size())
    return fmt::format("{} steps vs {}", a.steps.size(), b.steps.size());
  for (std::size_t s = 0; s < a.steps.size(); ++s) {
    if (!same_bits(a.steps[s].loss, b.steps[s].loss)) {
      return fmt::format("loss of step {}: {:.9g} vs {:.9g}", s, a.steps[s].loss, b.steps[s].loss);
    }
    if (!same_bits(a.steps[s].grad_norm, b.steps[s].grad_norm)) {
      return fmt::format("grad norm of step {}: {:.17g} vs {:.17g}", s, a.steps[s].grad_norm,
                         b.steps[s].grad_norm);
    }
    if (!same_bits(a.steps[s].lr, b.steps[s].lr)) {
      return fmt::format("lr of step {}: {:.17g} vs {:.17g}", s, a.steps[s].lr, b.steps[s].lr);
    }
    if (a.steps[s].skipped != b.steps[s].skipped) {
      return fmt::format("step {} skipped: {} vs {}", s, a.steps[s].skipped, b.steps[s].skipped);
    }
  }
  return std::nullopt;
}

}  // namespace zl
