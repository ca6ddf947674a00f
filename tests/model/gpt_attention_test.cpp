// gpt_attention_test.cpp — CpuDevice's causal attention and embedding kernels: attention
// against the double reference and double central differences, the per-row stats it keeps
// instead of probabilities, and causality;
// the embedding's exact sums, in the documented order, and its message for a bad token.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "ckpt/test_files.hpp"
#include "gpt_reference.hpp"
#include "ops/attention_tile.hpp"
#include "ops/cpu/cpu_device.hpp"

namespace zl {
namespace {

using test::central_differences;
using test::check_gradient;
using test::error_of;
using test::expect_gradient_ok;
using test::kOpAbsTol;
using test::kOpRelTol;
using test::kOpStep;
using test::random_normals;
using test::to_double;
using test::weighted_sum;
using ::testing::HasSubstr;

constexpr std::int64_t kB = 2, kT = 5, kC = 6, kHeads = 2;

TEST(GptOps, AttentionForwardIsCausalSoftmaxAttention) {
  CpuDevice device;
  auto qkv = random_normals(1, kB * kT * 3 * kC);
  std::vector<float> stats(kB * kHeads * kT * kAttentionStatsPerRow, 7.0f), out(kB * kT * kC);
  device.attention_forward(qkv, stats, out, kB, kT, kC, kHeads);
  const auto expected = test::ref_attention(to_double(qkv), kB, kT, kC, kHeads);
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], expected[i], 1e-6) << i;
  // Each row keeps its largest score m and l = sum over s <= t of exp(score - m), and nothing of
  // the T x T probabilities.
  const std::int64_t D = kC / kHeads;
  for (std::int64_t b = 0; b < kB; ++b) {
    for (std::int64_t h = 0; h < kHeads; ++h) {
      for (std::int64_t t = 0; t < kT; ++t) {
        std::vector<double> scores;
        for (std::int64_t s = 0; s <= t; ++s) {
          double dot = 0.0;
          for (std::int64_t d = 0; d < D; ++d) {
            dot += static_cast<double>(qkv[(b * kT + t) * 3 * kC + h * D + d]) *
                   qkv[(b * kT + s) * 3 * kC + kC + h * D + d];
          }
          scores.push_back(dot / std::sqrt(static_cast<double>(D)));
        }
        const double m = *std::max_element(scores.begin(), scores.end());
        double l = 0.0;
        for (const double z : scores) l += std::exp(z - m);
        const float* row = stats.data() + ((b * kHeads + h) * kT + t) * kAttentionStatsPerRow;
        EXPECT_NEAR(row[0], m, 1e-6) << b << " " << h << " " << t;
        EXPECT_NEAR(row[1], l, 1e-6 * l) << b << " " << h << " " << t;
      }
    }
  }
  // Changing the last position's k and v leaves every earlier output bit for bit.
  const auto before = out;
  for (std::int64_t b = 0; b < kB; ++b) {
    for (std::int64_t c = kC; c < 3 * kC; ++c) qkv[(b * kT + kT - 1) * 3 * kC + c] += 1.5f;
  }
  device.attention_forward(qkv, stats, out, kB, kT, kC, kHeads);
  for (std::int64_t b = 0; b < kB; ++b) {
    for (std::int64_t i = 0; i < (kT - 1) * kC; ++i)
      EXPECT_EQ(out[b * kT * kC + i], before[b * kT * kC + i]) << "b " << b << " element " << i;
  }
}

TEST(GptOps, AttentionBackwardMatchesFiniteDifferences) {
  CpuDevice device;
  const auto qkv = random_normals(1, kB * kT * 3 * kC), dout = random_normals(2, kB * kT * kC);
  std::vector<float> stats(kB * kHeads * kT * kAttentionStatsPerRow), out(kB * kT * kC);
  device.attention_forward(qkv, stats, out, kB, kT, kC, kHeads);
  std::vector<float> dqkv(qkv.size(), 99.0f);  // overwritten
  device.attention_backward(qkv, stats, out, dout, dqkv, kB, kT, kC, kHeads);
  const auto numeric = central_differences(
      [&](std::span<const double> v) {
        return weighted_sum(dout, test::ref_attention(v, kB, kT, kC, kHeads));
      },
      to_double(qkv), kOpStep);
  expect_gradient_ok("dqkv", check_gradient(dqkv, numeric, kOpAbsTol, kOpRelTol));
}

// attention_tile::exp_float, the CPU's and the GPU's exponential: within 1 ulp of the correctly
// rounded e^t over its range, exact at 0, and 0, +inf or NaN where it says.
TEST(GptOps, AttentionExpIsWithinOneUlp) {
  const auto ulps_apart = [](float a, float b) {
    return std::abs(static_cast<std::int64_t>(std::bit_cast<std::int32_t>(a)) -
                    std::bit_cast<std::int32_t>(b));
  };
  std::int64_t worst = 0;
  for (float t = -87.0f; t <= 88.0f; t += 0.000731f) {
    const auto expected = static_cast<float>(std::exp(static_cast<double>(t)));
    worst = std::max(worst, ulps_apart(attention_tile::exp_float(t), expected));
  }
  EXPECT_LE(worst, 1);
  EXPECT_EQ(attention_tile::exp_float(0.0f), 1.0f);
  EXPECT_EQ(attention_tile::exp_float(-0.0f), 1.0f);
  EXPECT_EQ(attention_tile::exp_float(-87.5f), 0.0f);
  EXPECT_EQ(attention_tile::exp_float(-std::numeric_limits<float>::infinity()), 0.0f);
  EXPECT_EQ(attention_tile::exp_float(88.5f), std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::isnan(attention_tile::exp_float(std::nanf(""))));
}

// Over several tiles of 32 keys, the last one partial, the online softmax rescales its running
// sums from tile to tile: forward against the double reference, and backward along a random
// direction against the reference's central difference.
TEST(GptOps, AttentionOverManyTilesMatchesTheDoubleReference) {
  constexpr std::int64_t B = 1, T = 100, C = 32, H = 2;
  CpuDevice device;
  const auto qkv = random_normals(3, B * T * 3 * C), dout = random_normals(4, B * T * C);
  std::vector<float> stats(B * H * T * kAttentionStatsPerRow), out(B * T * C), dqkv(qkv.size());
  device.attention_forward(qkv, stats, out, B, T, C, H);
  const auto expected = test::ref_attention(to_double(qkv), B, T, C, H);
  for (std::size_t i = 0; i < out.size(); ++i) EXPECT_NEAR(out[i], expected[i], 1e-5) << i;
  device.attention_backward(qkv, stats, out, dout, dqkv, B, T, C, H);
  const auto direction = random_normals(5, B * T * 3 * C);
  const auto loss_at = [&](double step) {
    auto moved = to_double(qkv);
    for (std::size_t i = 0; i < moved.size(); ++i) moved[i] += step * direction[i];
    return weighted_sum(dout, test::ref_attention(moved, B, T, C, H));
  };
  constexpr double kStep = 1e-4;
  const double numeric = (loss_at(kStep) - loss_at(-kStep)) / (2 * kStep);
  double analytic = 0.0;
  for (std::size_t i = 0; i < dqkv.size(); ++i) analytic += double{dqkv[i]} * direction[i];
  EXPECT_NEAR(analytic, numeric, 1e-4 * std::max(1.0, std::abs(numeric)));
}

TEST(GptOps, EmbeddingAddsTokenAndPositionRows) {
  CpuDevice device;
  const std::int64_t B = 2, T = 3, C = 4, V = 5;
  const std::vector<std::int64_t> tokens = {4, 1, 4, 0, 4, 2};  // token 4 three times
  const auto wte = random_normals(1, V * C), wpe = random_normals(2, T * C),
             dx = random_normals(3, B * T * C);
  std::vector<float> x(B * T * C);
  device.embedding_forward(tokens, wte, wpe, x, B, T, C, V);
  for (std::int64_t n = 0; n < B * T; ++n) {
    for (std::int64_t c = 0; c < C; ++c)
      EXPECT_EQ(x[n * C + c], wte[tokens[n] * C + c] + wpe[(n % T) * C + c]);
  }
  auto dwte = random_normals(4, V * C), dwpe = random_normals(5, T * C);
  const auto dwte0 = dwte, dwpe0 = dwpe;
  device.embedding_backward(tokens, dx, dwte, dwpe, B, T, C, V);
  for (std::int64_t c = 0; c < C; ++c) {
    // Row 4 gets positions (0,0), (0,2), (1,1) added in that order; unused rows stay as they were.
    EXPECT_EQ(dwte[4 * C + c],
              ((dwte0[4 * C + c] + dx[0 * C + c]) + dx[2 * C + c]) + dx[4 * C + c]);
    EXPECT_EQ(dwte[3 * C + c], dwte0[3 * C + c]);
    EXPECT_EQ(dwpe[1 * C + c], (dwpe0[1 * C + c] + dx[1 * C + c]) + dx[4 * C + c]);
  }
  const std::vector<std::int64_t> bad = {4, 1, 4, 0, 5, 2};
  EXPECT_THAT(error_of([&] { device.embedding_forward(bad, wte, wpe, x, B, T, C, V); }),
              HasSubstr("token 5 at row 1, position 1 is outside the vocabulary [0, 5)"));
}

}  // namespace
}  // namespace zl
