// fp16_bits.hpp — an fp16 element as a type of its own (private to src/ops/cuda): bf16 arrays
// reach the kernels as std::uint16_t, fp16 ones as Fp16, so overloads and templates tell the two
// formats apart while both are 16 bits as zerolab stores them (core/dtype.hpp).
#pragma once

#include <cstdint>

namespace zl::cuda {

/// One fp16 (IEEE binary16) element: its bits.
struct Fp16 {
  std::uint16_t bits;  ///< sign, 5 exponent bits, 10 mantissa bits
};
static_assert(sizeof(Fp16) == 2, "an fp16 array is 2 bytes an element");

}  // namespace zl::cuda
