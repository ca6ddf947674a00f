// fast_attention_emulated_test.cpp — the CUDA device's fast attention kernels
// (src/ops/cuda/cuda_fast_attention.cuh), run on the CPU by the emulator in include/ (its mma.sync
// stand-in included), against CpuDevice's attention: out, stats and dqkv within bf16's rounding.
// The tiles, masks, fragment layouts and the order of the online softmax are the kernels' own;
// only the order of the 16 additions inside one MMA is the stand-in's. Shapes cover a sequence
// shorter than a tile, whole and partial tiles, several tiles a head, and each head size the
// kernels take (16, 32, 64). Every output element must be written (outputs start as NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu/cpu_device.hpp"
#include "ops/cuda/cuda_fast_attention.cuh"

namespace zl {
namespace {

using cuda_emulation::emulate;
namespace fa = cuda::fast_attention;

struct Shape {
  std::int64_t batch, seq_len, channels, heads;
};

void PrintTo(const Shape& s, std::ostream* out) {
  *out << "B " << s.batch << ", T " << s.seq_len << ", C " << s.channels << ", heads " << s.heads;
}

std::vector<float> uniform_floats(std::size_t count, unsigned seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<float> values(count);
  for (float& value : values) value = uniform(generator);
  return values;
}

// ||got - want|| / ||want||, and whether every element of `got` is a number.
double relative_error(const std::vector<float>& got, const std::vector<float>& want) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    if (std::isnan(got[i])) return INFINITY;
    diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
    norm += static_cast<double>(want[i]) * want[i];
  }
  return std::sqrt(diff / norm);
}

// The launches of cuda_fast_attention.cu, through the emulator.
struct Launch {
  dim3 grid;
  std::int64_t D;
  float scale;
  explicit Launch(const Shape& s)
      : grid(static_cast<unsigned>(s.batch * s.heads),
             static_cast<unsigned>((s.seq_len + fa::kTileRows - 1) / fa::kTileRows)),
        D(s.channels / s.heads),
        scale(static_cast<float>(attention_scale(D))) {}
};

void forward(const Shape& s, const std::vector<float>& qkv, std::vector<float>& stats,
             std::vector<float>& out) {
  const Launch at(s);
  ASSERT_TRUE(fa::with_head_dim(at.D, [&]<int kD>() {
    emulate(fa::forward_kernel<kD>, at.grid, dim3(fa::kThreads), fa::kForwardSharedBytes<kD>)(
        qkv.data(), stats.data(), out.data(), s.seq_len, s.channels, s.heads, at.scale);
  }));
}

void backward(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& stats,
              const std::vector<float>& out, const std::vector<float>& dout,
              std::vector<float>& dqkv) {
  const Launch at(s);
  std::vector<float> delta(static_cast<std::size_t>(s.batch * s.heads * s.seq_len), std::nanf(""));
  ASSERT_TRUE(fa::with_head_dim(at.D, [&]<int kD>() {
    emulate(fa::dq_kernel<kD>, at.grid, dim3(fa::kThreads), fa::kDqSharedBytes<kD>)(
        qkv.data(), stats.data(), out.data(), dout.data(), dqkv.data(), delta.data(), s.seq_len,
        s.channels, s.heads, at.scale);
    emulate(fa::dkv_kernel<kD>, at.grid, dim3(fa::kThreads), fa::kDkvSharedBytes<kD>)(
        qkv.data(), stats.data(), dout.data(), delta.data(), dqkv.data(), s.seq_len, s.channels,
        s.heads, at.scale);
  }));
}

// The q, k or v columns (part 0, 1 or 2) of a [B, T, 3C] tensor.
std::vector<float> part(const std::vector<float>& qkv, std::int64_t channels, int which) {
  std::vector<float> columns;
  for (std::size_t row = 0; row < qkv.size() / (3 * channels); ++row) {
    const auto first = qkv.begin() + static_cast<std::ptrdiff_t>(row * 3 * channels + which * channels);
    columns.insert(columns.end(), first, first + channels);
  }
  return columns;
}

class FastAttentionEmulated : public ::testing::TestWithParam<Shape> {};

TEST_P(FastAttentionEmulated, IsTheCpuDevicesAttentionWithinBf16Rounding) {
  const Shape s = GetParam();
  const auto rows = static_cast<std::size_t>(s.batch * s.seq_len);
  const auto qkv = uniform_floats(rows * 3 * s.channels, 40),
             dout = uniform_floats(rows * s.channels, 41);
  const std::size_t stats_floats = rows * s.heads * kAttentionStatsPerRow;
  std::vector<float> stats(stats_floats), out(rows * s.channels), dqkv(rows * 3 * s.channels);
  CpuDevice cpu;
  cpu.attention_forward(qkv, stats, out, s.batch, s.seq_len, s.channels, s.heads);
  cpu.attention_backward(qkv, stats, out, dout, dqkv, s.batch, s.seq_len, s.channels, s.heads);

  std::vector<float> fast_stats(stats_floats, std::nanf("")), fast_out(out.size(), std::nanf("")),
      fast_dqkv(dqkv.size(), std::nanf(""));
  forward(s, qkv, fast_stats, fast_out);
  backward(s, qkv, fast_stats, fast_out, dout, fast_dqkv);
  // bf16 keeps 8 significant bits (relative rounding 2^-9): a tensor's error is a few of those
  EXPECT_LT(relative_error(fast_out, out), 6e-3);
  EXPECT_LT(relative_error(fast_stats, stats), 6e-3);
  for (int which = 0; which < 3; ++which) {
    EXPECT_LT(relative_error(part(fast_dqkv, s.channels, which), part(dqkv, s.channels, which)),
              1e-2)
        << "d" << "qkv"[which];
  }
}

INSTANTIATE_TEST_SUITE_P(
    CudaEmulation, FastAttentionEmulated,
    ::testing::Values(Shape{2, 5, 32, 2},     // shorter than a tile; D 16
                      Shape{1, 64, 64, 2},    // one whole tile; D 32
                      Shape{1, 100, 64, 1},   // a whole tile and a partial one; D 64
                      Shape{1, 193, 64, 1}),  // three whole tiles and one row
    [](const ::testing::TestParamInfo<Shape>& info) {
      const Shape& s = info.param;
      std::string name = "B";
      name.append(std::to_string(s.batch)).append("_T").append(std::to_string(s.seq_len));
      name.append("_C").append(std::to_string(s.channels)).append("_H");
      return name.append(std::to_string(s.heads));
    });

TEST(FastAttentionEmulated, TakesHeadSizes16To64InSixteens) {
  for (std::int64_t d = 1; d <= 256; ++d) {
    const bool takes = d == 16 || d == 32 || d == 64;
    EXPECT_EQ(fa::takes_head_dim(d), takes) << "head size " << d;
    EXPECT_EQ(fa::with_head_dim(d, []<int>() {}), takes) << "head size " << d;
  }
}

}  // namespace
}  // namespace zl
