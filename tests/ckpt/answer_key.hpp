// answer_key.hpp — loading a PyTorch answer key from tests/fixtures/ (written by make_fixtures.py)
// and comparing with it the llm.c way: one line per tensor, OK or NOT OK, with the largest
// difference.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>

#include "support/test_paths.hpp"

namespace zl::test {

/// Path of a fixture file in tests/fixtures/.
inline std::filesystem::path fixture_path(std::string_view name) {
  return std::filesystem::path(zl::test::data_dir()) / "fixtures" / name;
}

/// Largest |value| (0 for none): the scale of a tensor, for absolute tolerances.
inline double max_abs(std::span<const float> values) {
  double largest = 0;
  for (const float value : values)
    largest = std::max(largest, std::abs(static_cast<double>(value)));
  return largest;
}

/// How far `actual` is from the answer key.
struct Closeness {
  bool ok = true;
  double max_abs_diff = 0;  ///< max |actual - expected|
  double max_rel_diff = 0;  ///< max |actual - expected| / |expected| over nonzero expected
  std::size_t worst = 0;    ///< element with the largest |diff| / (atol + rtol |expected|)
  std::string report;       ///< the printed line
};

/// Checks |actual - expected| <= atol + rtol * |expected| for every element (the rule of
/// torch.testing.assert_close) and prints "OK"/"NOT OK", the largest differences and the worst
/// element with both values.
inline Closeness compare(std::string_view what, std::span<const float> actual,
                         std::span<const float> expected, double rtol, double atol) {
  Closeness result;
  double worst_ratio = 0;
  result.ok = actual.size() == expected.size();
  for (std::size_t i = 0; result.ok && i < actual.size(); ++i) {
    const double diff = std::abs(static_cast<double>(actual[i]) - expected[i]);
    const double allowed = atol + rtol * std::abs(static_cast<double>(expected[i]));
    result.max_abs_diff = std::max(result.max_abs_diff, diff);
    if (expected[i] != 0)
      result.max_rel_diff = std::max(result.max_rel_diff, diff / std::abs(expected[i]));
    const double ratio = diff == 0 ? 0 : (allowed == 0 ? INFINITY : diff / allowed);
    if (ratio > worst_ratio || std::isnan(diff)) {
      worst_ratio = std::isnan(diff) ? INFINITY : ratio;
      result.worst = i;
    }
  }
  result.ok = result.ok && worst_ratio <= 1;
  if (actual.size() != expected.size()) {
    result.report = fmt::format("NOT OK {:<28} {} elements, answer key has {}", what, actual.size(),
                                expected.size());
  } else {
    result.report =
        fmt::format("{:<6} {:<28} max abs diff {:.3e}  max rel diff {:.3e}",
                    result.ok ? "OK" : "NOT OK", what, result.max_abs_diff, result.max_rel_diff);
    if (!result.ok) {
      result.report += fmt::format("  worst [{}]: {:.9g} vs torch {:.9g}", result.worst,
                                   actual[result.worst], expected[result.worst]);
    }
  }
  fmt::print("{}\n", result.report);
  return result;
}

}  // namespace zl::test
