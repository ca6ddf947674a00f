// same_bits.hpp — asserting that a device's float results are the CPU's bit for bit (tests/gpu,
// tests/cuda_emulation).
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace zl::test {

/// Asserts the two vectors are equal bit for bit, printing the first difference.
inline void expect_same_bits(const std::vector<float>& actual, const std::vector<float>& expected,
                             const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(actual[i]) != std::bit_cast<std::uint32_t>(expected[i])) {
      ADD_FAILURE() << what << ": first different element " << i << " (device " << actual[i]
                    << ", cpu " << expected[i] << ")";
      return;
    }
  }
}

}  // namespace zl::test
