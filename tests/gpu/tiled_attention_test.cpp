// tiled_attention_test.cpp — the CUDA device's exact attention on a GPU: the tiled kernels give the CPU device's bits (both do the same float operations in the same order,
// ops/attention_tile.hpp) at every channels-per-lane width, with more than 48 KiB of shared
// memory (head size 256) and at GPT-2's shape; they repeat bit for bit; they keep no T x T
// scratch; the cuBLAS path (ZL_CUDA_ATTENTION=gemm) is still within cuda_device_test.cpp's fp32
// tolerance; and the one-line refusals. The same kernels run on the CPU, GPU or not, in
// tests/cuda_emulation. Every test skips when the machine has no GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "core/error.hpp"
#include "gpu_attention.hpp"
#include "ops/cuda/cuda_device.hpp"

namespace zl {
namespace {

using test::expect_close;
using test::expect_same_bits;
using test::random_floats;

constexpr double kTolerance = 1e-5;  // cuda_device_test.cpp's fp32 tolerance, for the gemm path

using Shape = test::AttentionShape;
using Attention = test::AttentionResult;

std::vector<float> qkv_of(const Shape& s) {
  return random_floats(s.batch * s.seq_len * 3 * s.channels, 40, -2.0f, 2.0f);
}
std::vector<float> dout_of(const Shape& s) {
  return random_floats(s.batch * s.seq_len * s.channels, 41);
}
Attention on_cpu(const Shape& s) {
  return test::cpu_attention(s, qkv_of(s), dout_of(s));
}
Attention on_gpu(CudaDevice& gpu, const Shape& s) {
  return test::gpu_attention(gpu, s, qkv_of(s), dout_of(s));
}

void expect_same_bits_as_cpu(const Attention& gpu, const Shape& s) {
  const Attention cpu = on_cpu(s);
  SCOPED_TRACE(::testing::PrintToString(s));
  expect_same_bits(gpu.stats, cpu.stats, "stats");
  expect_same_bits(gpu.out, cpu.out, "out");
  expect_same_bits(gpu.dqkv, cpu.dqkv, "dqkv");
}

// A CudaDevice made while ZL_CUDA_ATTENTION is `value` (the variable is restored after).
std::unique_ptr<CudaDevice> device_with_attention(const char* value) {
  ::setenv("ZL_CUDA_ATTENTION", value, 1);
  std::unique_ptr<CudaDevice> device;
  try {
    device = std::make_unique<CudaDevice>(0);
  } catch (...) {
    ::unsetenv("ZL_CUDA_ATTENTION");
    throw;
  }
  ::unsetenv("ZL_CUDA_ATTENTION");
  return device;
}

class TiledAttention : public ::testing::Test {
 protected:
  void SetUp() override {
    ZL_REQUIRE_GPU();
    ::unsetenv("ZL_CUDA_ATTENTION");
    gpu_ = std::make_unique<CudaDevice>(0);
    gpu_->set_attention(AttentionKind::Exact);
  }
  std::unique_ptr<CudaDevice> gpu_;
};

TEST_F(TiledAttention, GivesTheCpuDevicesBitsAtEveryHeadWidth) {
  for (const Shape s : {Shape{2, 45, 16, 2},         // D 8: 1 channel per lane; a partial tile
                        Shape{2, 257, 128, 2},       // D 64: 2 per lane
                        Shape{1, 100, 100, 1},       // D 100: 4 per lane, some lanes idle
                        Shape{1, 70, 256, 1},        // D 256: 8 per lane, 99 KiB of shared memory
                        Shape{1, 1024, 768, 12}}) {  // GPT-2 124M's attention, one sequence
    expect_same_bits_as_cpu(on_gpu(*gpu_, s), s);
  }
}

TEST_F(TiledAttention, RepeatsBitForBit) {
  const Shape s{3, 300, 192, 3};
  const Attention first = on_gpu(*gpu_, s), second = on_gpu(*gpu_, s);
  expect_same_bits(second.stats, first.stats, "stats");
  expect_same_bits(second.out, first.out, "out");
  expect_same_bits(second.dqkv, first.dqkv, "dqkv");
}

TEST_F(TiledAttention, KeepsNoSequenceSquaredScratch) {
  const Shape s{1, 4096, 512, 8};
  const std::int64_t square_bytes = s.heads * s.seq_len * s.seq_len * std::int64_t{4};  // 512 MiB
  // The device's own bytes once the freed buffers' cached blocks are given back: cuBLAS's
  // workspace and kernel scratch. The cuBLAS path's scratch holds 2 x heads x T x T floats.
  const auto own_bytes_after_attention = [&](CudaDevice& device) {
    on_gpu(device, s);
    device.release_cache();
    return device.memory_check().internal_bytes;
  };
  EXPECT_LT(own_bytes_after_attention(*gpu_), square_bytes / 8);
  const auto gemm = device_with_attention("gemm");
  EXPECT_GE(own_bytes_after_attention(*gemm), 2 * square_bytes);
}

TEST_F(TiledAttention, GemmPathStillMatchesCpu) {
  const auto gemm = device_with_attention("gemm");
  const Shape s{2, 300, 48, 4};
  const Attention got = on_gpu(*gemm, s), cpu = on_cpu(s);
  expect_close(got.stats, cpu.stats, kTolerance, "stats");
  expect_close(got.out, cpu.out, kTolerance, "out");
  expect_close(got.dqkv, cpu.dqkv, kTolerance, "dqkv");
}

TEST_F(TiledAttention, RefusesHeadsWiderThan256) {
  const Shape s{1, 4, 264, 1};
  EXPECT_THAT([&] { on_gpu(*gpu_, s); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                  "the head size is 264 (channels / heads), above the CUDA attention's 256")));
}

TEST_F(TiledAttention, RefusesAnUnknownAttentionSetting) {
  EXPECT_THAT([] { device_with_attention("flash"); },
              ::testing::ThrowsMessage<Error>(::testing::HasSubstr(
                  "ZL_CUDA_ATTENTION is 'flash': use exact, fast or gemm")));
}

}  // namespace
}  // namespace zl
