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
#include <vector>

#include "ops/cuda/cuda_fast_attention.cuh"
#include "support/attention_cases.hpp"

namespace zl {
namespace {

using cuda_emulation::emulate;
using Shape = test::AttentionShape;
using test::relative_error;
namespace fa = cuda::fast_attention;

// The launches of cuda_fast_attention.cu, through the emulator.
struct Launch {
  dim3 grid;
  std::int64_t D;
  float scale;
  explicit Launch(const Shape& s)
      : grid(fa::launch_grid(s.batch, s.seq_len, s.heads)),
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

class FastAttentionEmulated : public ::testing::TestWithParam<Shape> {};

TEST_P(FastAttentionEmulated, IsTheCpuDevicesAttentionWithinBf16Rounding) {
  const Shape s = GetParam();
  const auto rows = static_cast<std::size_t>(s.batch * s.seq_len);
  const auto qkv = test::uniform_floats(rows * 3 * s.channels, 40),
             dout = test::uniform_floats(rows * s.channels, 41);
  const test::AttentionResult cpu = test::cpu_attention(s, qkv, dout);

  std::vector<float> stats(cpu.stats.size(), std::nanf("")), out(cpu.out.size(), std::nanf("")),
      dqkv(cpu.dqkv.size(), std::nanf(""));
  forward(s, qkv, stats, out);
  backward(s, qkv, stats, out, dout, dqkv);
  // bf16 keeps 8 significant bits (relative rounding 2^-9): a tensor's error is a few of those
  EXPECT_LT(relative_error(out, cpu.out), 6e-3);
  EXPECT_LT(relative_error(stats, cpu.stats), 6e-3);
  const auto C = static_cast<std::size_t>(s.channels);
  for (std::size_t part = 0; part < 3; ++part) {
    EXPECT_LT(relative_error(dqkv, cpu.dqkv, part * C, C, 3 * C), 1e-2) << "d" << "qkv"[part];
  }
}

INSTANTIATE_TEST_SUITE_P(
    CudaEmulation, FastAttentionEmulated,
    ::testing::Values(Shape{2, 5, 32, 2},     // shorter than a tile; D 16
                      Shape{1, 64, 64, 2},    // one whole tile; D 32
                      Shape{1, 100, 64, 1},   // a whole tile and a partial one; D 64
                      Shape{1, 193, 64, 1}),  // three whole tiles and one row
    [](const ::testing::TestParamInfo<Shape>& info) {
      return test::attention_shape_name(info.param);
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
