// dtype.cpp — element sizes, names and the bit-exact fp32 <-> bf16/fp16 conversions.
#include "core/dtype.hpp"

#include <bit>

#include "core/error.hpp"

namespace zl {

std::size_t dtype_bytes(DType dtype) {
  switch (dtype) {
    case DType::F32: return 4;
    case DType::BF16: return 2;
    case DType::F16: return 2;
    case DType::F64: return 8;
    case DType::I64: return 8;
    case DType::I8:
      return 1;
  }
  fail("unknown dtype {}", static_cast<int>(dtype));
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::F32: return "fp32";
    case DType::BF16: return "bf16";
    case DType::F16: return "fp16";
    case DType::F64: return "fp64";
    case DType::I64: return "int64";
    case DType::I8:
      return "int8";
  }
  fail("unknown dtype {}", static_cast<int>(dtype));
}

namespace {

// Shifts `value` right by `shift` bits, rounding to nearest with ties to even.
std::uint32_t shift_round_even(std::uint32_t value, int shift) {
  if (shift == 0) return value;
  if (shift > 31) return 0;
  const std::uint32_t kept = value >> shift;
  const std::uint32_t rest = value & ((1u << shift) - 1u);
  const std::uint32_t half = 1u << (shift - 1);
  return (rest > half || (rest == half && (kept & 1u))) ? kept + 1u : kept;
}

}  // namespace

std::uint16_t f32_to_f16(float value) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t magnitude = bits & 0x7FFFFFFFu;
  if (magnitude > 0x7F800000u) return sign | 0x7E00u;      // NaN
  if (magnitude >= 0x47800000u) return sign | 0x7C00u;     // >= 2^16: infinity
  const int exponent = static_cast<int>(magnitude >> 23) - 127;  // unbiased
  const std::uint32_t mantissa = magnitude & 0x7FFFFFu;
  if (exponent < -14) {
    // Subnormal half: count in units of 2^-24. The fp32 value is (2^23 + mantissa) * 2^(e-23),
    // i.e. (2^23 + mantissa) >> (-e - 1) units; fp32 subnormals are far below and give zero.
    if (exponent == -127) return sign;
    const std::uint32_t significand = mantissa | 0x800000u;
    return sign | static_cast<std::uint16_t>(shift_round_even(significand, -exponent - 1));
  }
  // Normal half; a carry out of the mantissa correctly bumps the exponent (up to infinity).
  const std::uint32_t half_bits = (static_cast<std::uint32_t>(exponent + 15) << 10) | (mantissa >> 13);
  const std::uint32_t rest = mantissa & 0x1FFFu;
  const bool round_up = rest > 0x1000u || (rest == 0x1000u && (half_bits & 1u));
  return sign | static_cast<std::uint16_t>(half_bits + (round_up ? 1u : 0u));
}

float f16_to_f32(std::uint16_t bits) {
  const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
  const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
  std::uint32_t mantissa = bits & 0x3FFu;
  if (exponent == 0x1Fu) return std::bit_cast<float>(sign | 0x7F800000u | (mantissa << 13));
  if (exponent != 0) {
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (mantissa << 13));
  }
  if (mantissa == 0) return std::bit_cast<float>(sign);
  // Subnormal: normalise the mantissa.
  int shift = 0;
  while ((mantissa & 0x400u) == 0) {
    mantissa <<= 1;
    ++shift;
  }
  mantissa &= 0x3FFu;
  return std::bit_cast<float>(sign | (static_cast<std::uint32_t>(113 - shift) << 23) | (mantissa << 13));
}

}  // namespace zl
