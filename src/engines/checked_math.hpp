// checked_math.hpp — int64 sums and products of element and byte counts that fail in one line,
// saying what to change, instead of wrapping: the estimators' arithmetic.
#pragma once

#include <cstdint>
#include <limits>
#include <string_view>

#include "core/error.hpp"

namespace zl {

/// The largest int64: the bound the estimators' counts are checked against before they multiply.
inline constexpr std::int64_t kInt64Max = std::numeric_limits<std::int64_t>::max();

/// a + b; throws zl::Error "<a> + <b> overflows int64: <advice>" where it would wrap.
inline std::int64_t checked_add(std::int64_t a, std::int64_t b, std::string_view advice) {
  std::int64_t sum = 0;
  ZL_CHECK(!__builtin_add_overflow(a, b, &sum), "{} + {} overflows int64: {}", a, b, advice);
  return sum;
}

/// a * b; throws zl::Error "<a> x <b> overflows int64: <advice>" where it would wrap.
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b, std::string_view advice) {
  std::int64_t product = 0;
  ZL_CHECK(!__builtin_mul_overflow(a, b, &product), "{} x {} overflows int64: {}", a, b, advice);
  return product;
}

}  // namespace zl
