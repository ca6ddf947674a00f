// dtype_test.cpp — the 16-bit conversions against independent answer keys: GCC's _Float16
// (correctly rounded by the compiler runtime) for fp16, and exhaustive midpoint checks for both.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "core/dtype.hpp"
#include "core/rng.hpp"

namespace zl {
namespace {

TEST(DType, SizesAndNames) {
  EXPECT_EQ(dtype_bytes(DType::F32), 4u);
  EXPECT_EQ(dtype_bytes(DType::BF16), 2u);
  EXPECT_EQ(dtype_bytes(DType::F16), 2u);
  EXPECT_EQ(dtype_bytes(DType::F64), 8u);
  EXPECT_EQ(dtype_bytes(DType::I64), 8u);
  EXPECT_EQ(dtype_name(DType::BF16), "bf16");
}

TEST(DType, F16RoundTripsEveryHalf) {
  for (std::uint32_t bits = 0; bits <= 0xFFFF; ++bits) {
    const auto half = static_cast<std::uint16_t>(bits);
    const float value = f16_to_f32(half);
    if (std::isnan(value)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(value)))) << std::hex << bits;
      continue;
    }
    EXPECT_EQ(f32_to_f16(value), half) << std::hex << bits;
    EXPECT_EQ(static_cast<float>(std::bit_cast<_Float16>(half)), value) << std::hex << bits;
  }
}

TEST(DType, F16MatchesCompilerRounding) {
  // Random fp32 bit patterns (all exponents, so subnormals, overflow and ties are covered)
  // against the compiler's correctly rounded float -> _Float16 conversion.
  for (std::uint64_t i = 0; i < 2'000'000; ++i) {
    const std::uint32_t bits = philox4x32(7, 1, i)[0];
    const float value = std::bit_cast<float>(bits);
    if (std::isnan(value)) continue;
    const auto expected = std::bit_cast<std::uint16_t>(static_cast<_Float16>(value));
    ASSERT_EQ(f32_to_f16(value), expected) << "value " << value << " bits " << std::hex << bits;
  }
}

TEST(DType, F16TiesGoToEven) {
  for (std::uint32_t bits = 0; bits < 0x7BFF; ++bits) {  // every finite positive pair a < b
    const float a = f16_to_f32(static_cast<std::uint16_t>(bits));
    const float b = f16_to_f32(static_cast<std::uint16_t>(bits + 1));
    const float mid = a + (b - a) / 2;  // exact in fp32
    const std::uint32_t even = (bits & 1u) == 0 ? bits : bits + 1;
    ASSERT_EQ(f32_to_f16(mid), even) << std::hex << bits;
  }
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7C00);  // halfway past the largest half rounds to infinity
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7BFF);
}

TEST(DType, Bf16TiesGoToEvenAndRoundTrips) {
  for (std::uint32_t bits = 0; bits < 0x7F7F; ++bits) {
    const float a = bf16_to_f32(static_cast<std::uint16_t>(bits));
    const float b = bf16_to_f32(static_cast<std::uint16_t>(bits + 1));
    ASSERT_EQ(f32_to_bf16(a), bits);
    const float mid = std::bit_cast<float>(std::bit_cast<std::uint32_t>(a) + 0x8000u);
    ASSERT_GT(mid, a);
    ASSERT_LT(mid, b);
    const std::uint32_t even = (bits & 1u) == 0 ? bits : bits + 1;
    ASSERT_EQ(f32_to_bf16(mid), even) << std::hex << bits;
    const float above_mid = std::bit_cast<float>(std::bit_cast<std::uint32_t>(a) + 0x8001u);
    ASSERT_EQ(f32_to_bf16(above_mid), bits + 1) << std::hex << bits;
  }
  EXPECT_EQ(f32_to_bf16(-1.0f), 0xBF80);
  EXPECT_TRUE(std::isnan(bf16_to_f32(f32_to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7F80);
}

}  // namespace
}  // namespace zl
