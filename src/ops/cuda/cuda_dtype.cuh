// cuda_dtype.cuh — device twins of core/dtype.hpp's conversions (private to src/ops/cuda), the
// same bits as f32_to_bf16, bf16_to_f32, f32_to_f16 and f16_to_f32 on every input (tests/gpu
// checks them against the host functions). fp16 goes through CUDA's own round-to-nearest-even
// conversions, which agree with the host's on every value; NaN is handled here, as the host does
// it, since CUDA's conversions make every NaN the one canonical NaN.
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

/// f32_to_f16 on the device: round to nearest even (subnormals, overflow to infinity); NaN
/// becomes the quiet NaN 0x7E00 with its sign kept.
__device__ inline std::uint16_t to_f16(float value) {
  const std::uint32_t bits = __float_as_uint(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<std::uint16_t>(((bits >> 16) & 0x8000u) | 0x7E00u);
  }
  return __half_as_ushort(__float2half_rn(value));
}

/// f16_to_f32 on the device (exact); a NaN keeps its sign and payload.
__device__ inline float from_f16(std::uint16_t bits) {
  if ((bits & 0x7C00u) == 0x7C00u && (bits & 0x03FFu) != 0u) {
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    const std::uint32_t mantissa = static_cast<std::uint32_t>(bits & 0x03FFu) << 13;
    return __uint_as_float(sign | 0x7F800000u | mantissa);
  }
  return __half2float(__ushort_as_half(bits));
}

}  // namespace zl::cuda
