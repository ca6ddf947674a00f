// dtype.hpp — the element types zerolab stores and communicates, and exact conversions between
// fp32 and the 16-bit formats (round to nearest, ties to even, as IEEE 754 and PyTorch do).
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace zl {

/// Element type of a buffer or a collective.
enum class DType : std::uint8_t { F32, BF16, F16, F64, I64, I8 };

/// Bytes per element of `dtype`.
std::size_t dtype_bytes(DType dtype);

/// Short lower-case name ("fp32", "bf16", "fp16", "fp64", "int64", "int8") for messages and files.
/// int8 carries quantized bytes (ZeRO++'s qwZ and qgZ): collectives move it, none reduces it.
std::string_view dtype_name(DType dtype);

/// True for the dtypes parameters, gradients and activations are trained in: fp32, bf16, fp16.
inline bool is_training_dtype(DType dtype) {
  return dtype == DType::F32 || dtype == DType::BF16 || dtype == DType::F16;
}

/// fp32 -> bfloat16 bits, round to nearest even; NaN stays a quiet NaN with its sign. Inline,
/// so loops over arrays (reductions, casts) vectorize.
inline std::uint16_t f32_to_bf16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) {
    return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);  // quiet NaN, sign kept
  }
  // Adding 0x7FFF plus the lowest kept bit rounds to nearest and breaks ties toward even.
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

/// bfloat16 bits -> fp32 (exact).
inline float bf16_to_f32(std::uint16_t bits) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

/// fp32 -> IEEE binary16 bits, round to nearest even, with subnormals; overflow gives infinity.
std::uint16_t f32_to_f16(float value);

/// IEEE binary16 bits -> fp32 (exact).
float f16_to_f32(std::uint16_t bits);

}  // namespace zl
