// fast_attention_emulated_test.cpp — the CUDA device's fast attention kernels
// (src/ops/cuda/cuda_fast_attention.cuh), run on the CPU by the emulator in include/ (its mma.sync
// stand-in included), against CpuDevice's attention: out, stats and dqkv within bf16's rounding.
// The tiles, masks, fragment layouts and the order of the online softmax are the kernels' own;
// only the order of the 16 additions inside one MMA is the stand-in's. Shapes cover a sequence
// shorter than a tile, whole and partial tiles, several tiles a head, and each head size the
// kernels take (16, 32, 64). Every output element must be written (outputs start as NaN). With
// fp16 tiles the error is fp16's rounding, below what bf16 tiles give. On bf16 or fp16 q, k, v and
// out the kernels give their fp32 bits (tiles in that format) on the widened tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/dtype.hpp"
#include "ops/cuda/cuda_fast_attention_backward.cuh"
#include "ops/cuda/fp16_bits.hpp"
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

// q, k, v and out of element type Elem: float, or 16-bit (bf16 bits as std::uint16_t, or
// cuda::Fp16), tiles in Half (bf16 for fp32 unless asked). `async` false reads 16-bit tiles by
// plain loads (the launch's path for a qkv that is not 16-byte aligned); the bits are the same
// either way.
template <class Elem, class Half = typename fa::TilesOf<Elem>::type>
void forward(const Shape& s, const std::vector<Elem>& qkv, std::vector<float>& stats,
             std::vector<Elem>& out, bool async = true) {
  const Launch at(s);
  ASSERT_TRUE(fa::with_head_dim(at.D, [&]<int kD>() {
    emulate(fa::forward_kernel<kD, Elem, Half>, at.grid, dim3(fa::kThreads),
            fa::kForwardSharedBytes<kD>)(qkv.data(), stats.data(), out.data(), s.seq_len,
                                         s.channels, s.heads, at.scale, async);
  }));
}

template <class Elem, class Half = typename fa::TilesOf<Elem>::type>
void backward(const Shape& s, const std::vector<Elem>& qkv, const std::vector<float>& stats,
              const std::vector<Elem>& out, const std::vector<float>& dout,
              std::vector<float>& dqkv, bool async = true) {
  const Launch at(s);
  // the scratch starts as NaN, so a part the dq kernel does not write shows in dk and dv
  std::vector<float> scratch(
      (fa::backward_scratch_bytes(s.batch, s.seq_len, s.channels, s.heads) + 3) / 4, std::nanf(""));
  const fa::BackwardScratch<Half> parts =
      fa::backward_scratch<Half>(scratch.data(), s.batch, s.seq_len, s.heads);
  ASSERT_TRUE(fa::with_head_dim(at.D, [&]<int kD>() {
    emulate(fa::dq_kernel<kD, Elem, Half>, at.grid, dim3(fa::kThreads), fa::kDqSharedBytes<kD>)(
        qkv.data(), stats.data(), out.data(), dout.data(), dqkv.data(), parts, s.seq_len,
        s.channels, s.heads, at.scale, async);
    emulate(fa::dkv_kernel<kD, Elem, Half>, at.grid, dim3(fa::kThreads), fa::kDkvSharedBytes<kD>)(
        qkv.data(), parts, dqkv.data(), s.seq_len, s.channels, s.heads, at.scale, async);
  }));
}

// The 16-bit element H (std::uint16_t: bf16; cuda::Fp16) of a float, rounded to nearest even; its
// bits; and its float (exact).
template <class H>
H rounded(float value) {
  if constexpr (std::is_same_v<H, cuda::Fp16>) {
    return {f32_to_f16(value)};
  } else {
    return f32_to_bf16(value);
  }
}
std::uint16_t bits16(std::uint16_t bf16) {
  return bf16;
}
std::uint16_t bits16(cuda::Fp16 fp16) {
  return fp16.bits;
}
float widened(std::uint16_t bf16) {
  return bf16_to_f32(bf16);
}
float widened(cuda::Fp16 fp16) {
  return f16_to_f32(fp16.bits);
}

template <class H>
std::vector<H> rounded(const std::vector<float>& values) {
  std::vector<H> halves(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) halves[i] = rounded<H>(values[i]);
  return halves;
}

template <class H>
std::vector<std::uint16_t> bits16(const std::vector<H>& halves) {
  std::vector<std::uint16_t> bits(halves.size());
  for (std::size_t i = 0; i < halves.size(); ++i) bits[i] = bits16(halves[i]);
  return bits;
}

template <class H>
std::vector<float> widened(const std::vector<H>& halves) {
  std::vector<float> values(halves.size());
  for (std::size_t i = 0; i < halves.size(); ++i) values[i] = widened(halves[i]);
  return values;
}

std::vector<std::uint32_t> bits_of(const std::vector<float>& values) {
  std::vector<std::uint32_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

// The relative errors of the kernels' out, stats and dq, dk, dv (fp32 q, k, v; tiles in Half)
// against CpuDevice's attention, on uniform inputs.
struct Errors {
  double out, stats, dqkv[3];
};

template <class Half>
Errors errors_against_cpu(const Shape& s) {
  const auto rows = static_cast<std::size_t>(s.batch * s.seq_len);
  const auto qkv = test::uniform_floats(rows * 3 * s.channels, 40),
             dout = test::uniform_floats(rows * s.channels, 41);
  const test::AttentionResult cpu = test::cpu_attention(s, qkv, dout);

  std::vector<float> stats(cpu.stats.size(), std::nanf("")), out(cpu.out.size(), std::nanf("")),
      dqkv(cpu.dqkv.size(), std::nanf(""));
  forward<float, Half>(s, qkv, stats, out);
  backward<float, Half>(s, qkv, stats, out, dout, dqkv);
  const auto C = static_cast<std::size_t>(s.channels);
  Errors errors{relative_error(out, cpu.out), relative_error(stats, cpu.stats), {}};
  for (std::size_t part = 0; part < 3; ++part) {
    errors.dqkv[part] = relative_error(dqkv, cpu.dqkv, part * C, C, 3 * C);
  }
  return errors;
}

// Expects out's and stats' errors below `forward_bound` and dq's, dk's and dv's below
// `gradient_bound`.
void expect_errors_below(const Errors& errors, double forward_bound, double gradient_bound) {
  EXPECT_LT(errors.out, forward_bound);
  EXPECT_LT(errors.stats, forward_bound);
  for (std::size_t part = 0; part < 3; ++part) {
    EXPECT_LT(errors.dqkv[part], gradient_bound) << "d"
                                                 << "qkv"[part];
  }
}

class FastAttentionEmulated : public ::testing::TestWithParam<Shape> {};

// bf16 keeps 8 significant bits (relative rounding 2^-9): a tensor's error is a few of those.
TEST_P(FastAttentionEmulated, IsTheCpuDevicesAttentionWithinBf16Rounding) {
  expect_errors_below(errors_against_cpu<std::uint16_t>(GetParam()), 6e-3, 1e-2);
}

// fp16 keeps 11 significant bits (relative rounding 2^-12): the bounds are bf16's over 8, which
// the same kernels with bf16 tiles exceed.
TEST_P(FastAttentionEmulated, WithFp16TilesIsTheCpuDevicesAttentionWithinFp16Rounding) {
  expect_errors_below(errors_against_cpu<cuda::Fp16>(GetParam()), 6e-3 / 8, 1e-2 / 8);
}

// With qkv and out in H (bf16 or fp16, as the GPT keeps them under --bf16 or --fp16) the kernels
// read and write them as they are: the fp32 kernels' bits (tiles in H) on the widened tensors, out
// rounded once; and the same with tiles read by loads instead of cp.async.
template <class H>
void expect_fp32_kernels_on_widened_tensors(const Shape& s) {
  const auto rows = static_cast<std::size_t>(s.batch * s.seq_len);
  const auto qkv16 = rounded<H>(test::uniform_floats(rows * 3 * s.channels, 42));
  const auto dout = test::uniform_floats(rows * s.channels, 43);
  const auto C = static_cast<std::size_t>(s.channels);
  const std::size_t stats_elems = static_cast<std::size_t>(s.batch * s.heads * s.seq_len) * 2;
  const H nan16 = rounded<H>(std::nanf(""));

  std::vector<float> stats16(stats_elems, std::nanf("")), stats32(stats_elems, std::nanf(""));
  std::vector<H> out16(rows * C, nan16);
  std::vector<float> out32(rows * C, std::nanf(""));
  forward(s, qkv16, stats16, out16);
  forward<float, H>(s, widened(qkv16), stats32, out32);
  EXPECT_EQ(bits_of(stats16), bits_of(stats32));
  EXPECT_EQ(bits16(out16), bits16(rounded<H>(out32)));

  std::vector<float> dqkv16(rows * 3 * C, std::nanf("")), dqkv32(rows * 3 * C, std::nanf(""));
  backward(s, qkv16, stats16, out16, dout, dqkv16);
  backward<float, H>(s, widened(qkv16), stats16, widened(out16), dout, dqkv32);
  EXPECT_EQ(bits_of(dqkv16), bits_of(dqkv32));

  std::vector<float> stats_loaded(stats_elems, std::nanf(""));
  std::vector<H> out_loaded(rows * C, nan16);
  std::vector<float> dqkv_loaded(rows * 3 * C, std::nanf(""));
  forward(s, qkv16, stats_loaded, out_loaded, false);
  backward(s, qkv16, stats16, out16, dout, dqkv_loaded, false);
  EXPECT_EQ(bits_of(stats_loaded), bits_of(stats16));
  EXPECT_EQ(bits16(out_loaded), bits16(out16));
  EXPECT_EQ(bits_of(dqkv_loaded), bits_of(dqkv16));
}

// Two shapes each: head sizes 16 and 64, a partial tile, two tiles (the emulator's threads make
// each a few seconds).
class FastAttentionBf16Emulated : public ::testing::TestWithParam<Shape> {};

TEST_P(FastAttentionBf16Emulated, IsTheFp32KernelsOnTheWidenedTensors) {
  expect_fp32_kernels_on_widened_tensors<std::uint16_t>(GetParam());
}

class FastAttentionFp16Emulated : public ::testing::TestWithParam<Shape> {};

TEST_P(FastAttentionFp16Emulated, IsTheFp32KernelsOnTheWidenedTensors) {
  expect_fp32_kernels_on_widened_tensors<cuda::Fp16>(GetParam());
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

INSTANTIATE_TEST_SUITE_P(CudaEmulation, FastAttentionBf16Emulated,
                         ::testing::Values(Shape{2, 5, 32, 2}, Shape{1, 100, 64, 1}),
                         [](const ::testing::TestParamInfo<Shape>& info) {
                           return test::attention_shape_name(info.param);
                         });

INSTANTIATE_TEST_SUITE_P(CudaEmulation, FastAttentionFp16Emulated,
                         ::testing::Values(Shape{2, 5, 32, 2}, Shape{1, 100, 64, 1}),
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
