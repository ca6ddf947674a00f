// quantize_test.cpp — ZeRO++'s block quantizer (comm/quantize.hpp): its byte count, every value
// back within its block's closed-form bound, all-zero blocks exact, a non-finite block all NaN
// and its neighbours untouched, and int4's nibbles read back with their signs.
#include "comm/quantize.hpp"

#include <gtest/gtest.h>  // before rapidcheck/gtest.h, which needs it
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "core/error.hpp"

namespace zl {
namespace {

rc::Gen<QuantBits> gen_bits() {
  return rc::gen::element(QuantBits::Int4, QuantBits::Int8);
}

// Values of any magnitude a block may hold: m x 2^e, a few zeros among them.
rc::Gen<float> gen_value() {
  return rc::gen::apply(
      [](int mantissa, int exponent) { return std::ldexp(static_cast<float>(mantissa), exponent); },
      rc::gen::inRange(-1000, 1001), rc::gen::inRange(-60, 40));
}

std::vector<float> round_trip(const std::vector<float>& values, std::int64_t block_elems,
                              QuantBits bits) {
  std::vector<std::byte> bytes(static_cast<std::size_t>(
      quantized_bytes(static_cast<std::int64_t>(values.size()), block_elems, bits)));
  quantize_blocks(values, block_elems, bits, bytes);
  std::vector<float> back(values.size());
  dequantize_blocks(bytes, block_elems, bits, back);
  return back;
}

RC_GTEST_PROP(Quantize, prop_every_value_is_within_its_blocks_bound, ()) {
  const QuantBits bits = *gen_bits();
  const std::int64_t block_elems = 2 * *rc::gen::inRange<std::int64_t>(1, 33);
  const auto values = *rc::gen::container<std::vector<float>>(gen_value());
  const std::vector<float> back = round_trip(values, block_elems, bits);
  for (std::size_t first = 0; first < values.size();
       first += static_cast<std::size_t>(block_elems)) {
    const std::size_t last = std::min(values.size(), first + static_cast<std::size_t>(block_elems));
    double amax = 0.0;
    for (std::size_t i = first; i < last; ++i) amax = std::max(amax, std::fabs(double{values[i]}));
    const double bound = quantization_error_bound(amax, bits);
    for (std::size_t i = first; i < last; ++i) {
      RC_ASSERT(std::fabs(double{back[i]} - double{values[i]}) <= bound);
    }
  }
}

TEST(Quantize, BytesAreTheScalesThenTheCodes) {
  // Three blocks of 4 (the last of 2): 3 scales and 4 + 4 + 2 int8 codes, or 2 + 2 + 1 int4 bytes.
  EXPECT_EQ(quantized_bytes(10, 4, QuantBits::Int8), 3 * 4 + 10);
  EXPECT_EQ(quantized_bytes(10, 4, QuantBits::Int4), 3 * 4 + 5);
  EXPECT_EQ(quantized_bytes(9, 4, QuantBits::Int4), 3 * 4 + 2 + 2 + 1);
  EXPECT_EQ(quantized_bytes(0, 4, QuantBits::Int4), 0);
  EXPECT_THROW(quantized_bytes(8, 3, QuantBits::Int8), Error);
}

TEST(Quantize, Int4CodesKeepTheirSigns) {
  // amax 7: the scale is 1 and every integer in -7..7 is its own code, in either nibble.
  const std::vector<float> values{-7, 7, -1, 1, 0, -3, 5, -6};
  EXPECT_EQ(round_trip(values, 8, QuantBits::Int4), values);
  EXPECT_EQ(round_trip(values, 2, QuantBits::Int4)[1], 7.0f);
}

TEST(Quantize, HalfwayRoundsToEven) {
  // amax 7, scale 1: 2.5 and -0.5 sit halfway between codes and go to the even one.
  EXPECT_EQ(round_trip({7.0f, 2.5f, -0.5f, 3.5f}, 4, QuantBits::Int4),
            (std::vector<float>{7.0f, 2.0f, -0.0f, 4.0f}));
}

TEST(Quantize, ZeroBlocksStayZeroAndANonFiniteBlockTurnsNaN) {
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> values{0, 0, 0, 0, 1, inf, 2, 3, 0.5f, -0.25f};
  const std::vector<float> back = round_trip(values, 4, QuantBits::Int8);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(back[i], 0.0f);
  for (int i = 4; i < 8; ++i) EXPECT_TRUE(std::isnan(back[i])) << i;
  EXPECT_EQ(back[8], 0.5f);
  EXPECT_NEAR(back[9], -0.25f, quantization_error_bound(0.5, QuantBits::Int8));
}

}  // namespace
}  // namespace zl
