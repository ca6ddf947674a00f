// rng_test.cpp — Philox4x32-10 against the Random123 known-answer vectors, and the properties
// zerolab relies on: values depend only on (seed, stream, index).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>

#include "core/rng.hpp"

namespace zl {
namespace {

// Random123 kat_vectors, philox4x32 with 10 rounds: counter (c0..c3) and key (k0, k1), where our
// counter is (index low, index high, stream low, stream high) and key is (seed low, seed high).
TEST(Rng, PhiloxKnownAnswers) {
  using Words = std::array<std::uint32_t, 4>;
  EXPECT_EQ(philox4x32(0, 0, 0), (Words{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}));
  EXPECT_EQ(philox4x32(0xffffffffffffffffull, 0xffffffffffffffffull, 0xffffffffffffffffull),
            (Words{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}));
  EXPECT_EQ(philox4x32(0x299f31d0a4093822ull, 0x0370734413198a2eull, 0x85a308d3243f6a88ull),
            (Words{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}));
}

TEST(Rng, ValuesDependOnlyOnTheCounter) {
  // Drawing in a different order (as a different world size would) gives the same values.
  for (std::uint64_t i = 0; i < 100; ++i) {
    EXPECT_EQ(uniform01(3, 9, 99 - i), uniform01(3, 9, 99 - i));
    EXPECT_NE(uniform01(3, 9, i), uniform01(4, 9, i));
    EXPECT_NE(uniform01(3, 9, i), uniform01(3, 10, i));
  }
}

TEST(Rng, DistributionsLookRight) {
  constexpr int kCount = 200000;
  double sum = 0.0, sum_sq = 0.0, uniform_sum = 0.0;
  std::array<int, 5> counts{};
  for (int i = 0; i < kCount; ++i) {
    const double z = standard_normal(11, 2, static_cast<std::uint64_t>(i));
    sum += z;
    sum_sq += z * z;
    const float u = uniform01(11, 3, static_cast<std::uint64_t>(i));
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    uniform_sum += u;
    counts[uniform_below(11, 4, static_cast<std::uint64_t>(i), 5)] += 1;
  }
  EXPECT_NEAR(sum / kCount, 0.0, 0.01);
  EXPECT_NEAR(sum_sq / kCount, 1.0, 0.02);
  EXPECT_NEAR(uniform_sum / kCount, 0.5, 0.005);
  for (const int count : counts) EXPECT_NEAR(count, kCount / 5, kCount / 100);
}

TEST(Rng, StreamOfIsStableFnv1a) {
  EXPECT_EQ(stream_of(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(stream_of("a"), 0xaf63dc4c8601ec8cull);  // published FNV-1a 64 test vector
  EXPECT_NE(stream_of("layers.0.weight"), stream_of("layers.0.bias"));
}

}  // namespace
}  // namespace zl
