// cuda_dtype.cuh — device twins of core/dtype.hpp's conversions (private to src/ops/cuda): the
// same bits as f32_to_bf16 and bf16_to_f32 (tests/gpu checks them against the host functions);
// fp16 through CUDA's own round-to-nearest-even conversions, which agree with f32_to_f16 and
// f16_to_f32 on every value but NaN payloads.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>

namespace zl::cuda {

/// f32_to_bf16 on the device: round to nearest even; NaN made quiet with its sign kept.
__device__ inline std::uint16_t to_bf16(float value) {
  const std::uint32_t bits = __float_as_uint(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  }
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

/// bf16_to_f32 on the device (exact).
__device__ inline float from_bf16(std::uint16_t bits) {
  return __uint_as_float(static_cast<std::uint32_t>(bits) << 16);
}

/// fp32 -> IEEE binary16 bits, round to nearest even (subnormals, overflow to infinity).
__device__ inline std::uint16_t to_f16(float value) {
  return __half_as_ushort(__float2half_rn(value));
}

/// IEEE binary16 bits -> fp32 (exact).
__device__ inline float from_f16(std::uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}

}  // namespace zl::cuda
