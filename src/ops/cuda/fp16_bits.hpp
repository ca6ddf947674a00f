// fp16_bits.hpp — an fp16 element as a type of its own (private to src/ops/cuda): bf16 arrays
// reach the kernels as std::uint16_t, fp16 ones as Fp16, so overloads and templates tell the two
// formats apart while both are 16 bits as zerolab stores them (core/dtype.hpp); for_half picks the
// type of a 16-bit DType.
#pragma once

#include <cstdint>

#include "core/dtype.hpp"

namespace zl::cuda {

/// One fp16 (IEEE binary16) element: its bits.
struct Fp16 {
  std::uint16_t bits;  ///< sign, 5 exponent bits, 10 mantissa bits
};
static_assert(sizeof(Fp16) == 2, "an fp16 array is 2 bytes an element");

/// True for the two 16-bit formats, BF16 and F16.
inline bool is_half(DType dtype) {
  return dtype == DType::BF16 || dtype == DType::F16;
}

/// f.template operator()<H>() with H the kernels' element type of the 16-bit `dtype`: Fp16 for
/// F16, std::uint16_t for BF16.
template <class F>
void for_half(DType dtype, F&& f) {
  if (dtype == DType::F16) {
    f.template operator()<Fp16>();
  } else {
    f.template operator()<std::uint16_t>();
  }
}

}  // namespace zl::cuda
