// tiled_attention_emulated_test.cpp — the CUDA device's tiled attention kernels
// (src/ops/cuda/cuda_tiled_attention.cuh), run on the CPU by the emulator in include/, give
// CpuDevice's attention bit for bit: forward's out and stats, and backward's dqkv. The two are
// written to do the same operations in the same order (ops/attention_tile.hpp), so any
// difference is a bug in one of them. The shapes cover a sequence shorter than a tile, whole
// and partial tiles, and every channels-per-lane variant (1, 2, 4 and 8, with heads that leave
// lanes idle). The grid, block and shared memory of each launch are the header's, as
// cuda_tiled_attention.cu launches them. Runs everywhere, GPU or not; under ThreadSanitizer a
// missing barrier is a reported race.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "ops/cuda/cuda_tiled_attention.cuh"
#include "support/attention_cases.hpp"
#include "support/same_bits.hpp"

namespace zl {
namespace {

using cuda_emulation::emulate;
using test::expect_same_bits;
using Shape = test::AttentionShape;
namespace ta = cuda::tiled_attention;

// The launches of cuda_tiled_attention.cu, through the emulator.
void forward(const Shape& s, const std::vector<float>& qkv, std::vector<float>& stats,
             std::vector<float>& out) {
  const int D = static_cast<int>(s.channels / s.heads);
  const ta::Launch at = ta::launch_shape(s.batch, s.seq_len, s.heads);
  const auto scale = static_cast<float>(attention_scale(D));
  ta::with_channels_per_lane(D, [&]<int kDPerLane>() {
    emulate(ta::forward_kernel<kDPerLane>, at.grid, at.block, ta::forward_shared_bytes(D))(
        qkv.data(), stats.data(), out.data(), s.seq_len, s.channels, D, s.heads, scale, at.tiles);
  });
}

void backward(const Shape& s, const std::vector<float>& qkv, const std::vector<float>& stats,
              const std::vector<float>& out, const std::vector<float>& dout,
              std::vector<float>& dqkv) {
  const int D = static_cast<int>(s.channels / s.heads);
  const ta::Launch at = ta::launch_shape(s.batch, s.seq_len, s.heads);
  const auto scale = static_cast<float>(attention_scale(D));
  std::vector<float> delta(static_cast<std::size_t>(s.batch * s.heads * s.seq_len), std::nanf(""));
  ta::with_channels_per_lane(D, [&]<int kDPerLane>() {
    emulate(ta::dq_kernel<kDPerLane>, at.grid, at.block, ta::dq_shared_bytes(D))(
        qkv.data(), stats.data(), out.data(), dout.data(), dqkv.data(), delta.data(), s.seq_len,
        s.channels, D, s.heads, scale, at.tiles);
    emulate(ta::dkv_kernel<kDPerLane>, at.grid, at.block, ta::dkv_shared_bytes(D))(
        qkv.data(), stats.data(), dout.data(), delta.data(), dqkv.data(), s.seq_len, s.channels, D,
        s.heads, scale, at.tiles);
  });
}

class TiledAttentionEmulated : public ::testing::TestWithParam<Shape> {};

TEST_P(TiledAttentionEmulated, GivesTheCpuDevicesBits) {
  const Shape s = GetParam();
  const auto rows = static_cast<std::size_t>(s.batch * s.seq_len);
  const auto qkv = test::uniform_floats(rows * 3 * s.channels, 30),
             dout = test::uniform_floats(rows * s.channels, 31);
  const test::AttentionResult cpu = test::cpu_attention(s, qkv, dout);

  std::vector<float> stats(cpu.stats.size(), std::nanf("")), out(cpu.out.size(), std::nanf("")),
      dqkv(cpu.dqkv.size(), std::nanf(""));
  forward(s, qkv, stats, out);
  expect_same_bits(out, cpu.out, "out");
  expect_same_bits(stats, cpu.stats, "stats");
  backward(s, qkv, stats, out, dout, dqkv);
  expect_same_bits(dqkv, cpu.dqkv, "dqkv");
}

INSTANTIATE_TEST_SUITE_P(
    CudaEmulation, TiledAttentionEmulated,
    ::testing::Values(Shape{2, 5, 8, 2},      // shorter than a tile; 1 channel per lane, 4 used
                      Shape{1, 40, 24, 2},    // a whole tile and a partial one; D 12
                      Shape{1, 40, 18, 2},    // D 9, not a multiple of 4: one channel at a time
                      Shape{1, 64, 64, 1},    // two whole tiles; D 64, 2 channels per lane
                      Shape{1, 33, 100, 1},   // D 100: 4 channels per lane, the last partly idle
                      Shape{1, 33, 200, 1}),  // D 200: 8 channels per lane
    [](const ::testing::TestParamInfo<Shape>& info) {
      return test::attention_shape_name(info.param);
    });

}  // namespace
}  // namespace zl
