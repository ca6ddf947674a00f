// host_convert.hpp — elements of the training dtypes (fp32, bf16, fp16) read and written as fp32
// in host memory, with dtype.hpp's conversions: widening is exact, rounding is to nearest even.
// CpuDevice's step work is built on them, and host code that reads or fills a 16-bit buffer
// (a copy downloaded from a device, values to upload) converts with them, so every conversion
// on the host has the bits every Device::convert gives.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.hpp"

namespace zl {

/// Element i of `data`, an array of `dtype` (fp32, bf16 or fp16), as fp32 (exact).
inline float element_f32(DType dtype, const void* data, std::size_t i) {
  switch (dtype) {
    case DType::BF16:
      return bf16_to_f32(static_cast<const std::uint16_t*>(data)[i]);
    case DType::F16:
      return f16_to_f32(static_cast<const std::uint16_t*>(data)[i]);
    default:
      return static_cast<const float*>(data)[i];
  }
}

/// Sets element i of `data`, an array of `dtype` (fp32, bf16 or fp16), to `value` rounded to
/// nearest even.
inline void set_element_f32(DType dtype, void* data, std::size_t i, float value) {
  switch (dtype) {
    case DType::BF16:
      static_cast<std::uint16_t*>(data)[i] = f32_to_bf16(value);
      return;
    case DType::F16:
      static_cast<std::uint16_t*>(data)[i] = f32_to_f16(value);
      return;
    default:
      static_cast<float*>(data)[i] = value;
  }
}

/// out[i] = in[i] converted from `in_dtype` to `out_dtype` (training dtypes, checked by the
/// caller), `elems` elements of host memory that do not overlap: Device::convert's bits.
inline void convert_on_host(const void* in, DType in_dtype, void* out, DType out_dtype,
                            std::int64_t elems) {
  for (std::size_t i = 0; i < static_cast<std::size_t>(elems); ++i) {
    set_element_f32(out_dtype, out, i, element_f32(in_dtype, in, i));
  }
}

}  // namespace zl
