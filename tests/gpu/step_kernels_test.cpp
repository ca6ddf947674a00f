// step_kernels_test.cpp — the CUDA Device's elementwise step kernels against the host code they
// stand for, bit for bit: the residual add and scaling loops, f32_to_bf16, and the gradient norm's
// block sums of squares (append_block_sumsq), on random values with infinities and NaN mixed in
// (a NaN matches a NaN whatever its payload).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "gpu_test_support.hpp"
#include "optim/grad_norm.hpp"

namespace zl {
namespace {

constexpr std::int64_t kElems = 64 * 101;  // whole gradient-norm blocks, an odd count of them

std::vector<float> values_with_specials(std::uint32_t seed) {
  auto values = test::random_floats(kElems, seed, -1e4f, 1e4f);
  values[10] = std::numeric_limits<float>::infinity();
  values[20] = -0.0f;
  values[30] = std::numeric_limits<float>::denorm_min();
  values[40] = 3.0e38f;
  values[50] = 1.00390625f;  // exactly halfway between two bf16 values: ties to even
  values[60] = std::numeric_limits<float>::quiet_NaN();
  return values;
}

bool same_value(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

TEST(GpuStepKernels, AddScaleAndCastGiveTheHostBits) {
  ZL_REQUIRE_GPU();
  CudaDevice device(0);
  const auto x = values_with_specials(60), y = values_with_specials(61);
  Buffer gx = test::upload(device, x), gy = test::upload(device, y);
  Buffer bf16 = device.alloc(MemCategory::Params, DType::BF16, {kElems});
  device.cast_to_bf16(gx.as<float>(), bf16.as<std::uint16_t>());
  device.add_inplace(gx.as<float>(), gy.as<float>());
  device.scale_inplace(gx.as<float>(), 0.37f);
  std::vector<float> expected = x;
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += y[i];
  for (float& value : expected) value = value * 0.37f;
  const auto actual = test::download(device, gx);
  const auto actual_bf16 = test::download<std::uint16_t>(device, bf16);
  for (std::size_t i = 0; i < expected.size(); ++i) {
    ASSERT_TRUE(same_value(actual[i], expected[i]))
        << "element " << i << ": gpu " << actual[i] << ", cpu " << expected[i];
    const std::uint16_t want = f32_to_bf16(x[i]);
    ASSERT_TRUE(actual_bf16[i] == want ||
                (std::isnan(bf16_to_f32(actual_bf16[i])) && std::isnan(bf16_to_f32(want))))
        << "bf16 element " << i << ": gpu " << actual_bf16[i] << ", cpu " << want;
  }
}

TEST(GpuStepKernels, BlockSumsOfSquaresAreTheHostPartials) {
  ZL_REQUIRE_GPU();
  CudaDevice device(0);
  auto grads = test::random_floats(kElems, 62);
  grads[100] = std::numeric_limits<float>::infinity();  // one block's partial is infinite
  Buffer g = test::upload(device, grads);
  std::vector<double> expected = {1.5}, actual = {1.5};  // both append after what is there
  append_block_sumsq(grads, expected);
  device.append_block_sumsq(g.as<float>(), actual);
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t b = 0; b < expected.size(); ++b) {
    EXPECT_EQ(std::bit_cast<std::uint64_t>(actual[b]), std::bit_cast<std::uint64_t>(expected[b]))
        << "partial " << b << ": gpu " << actual[b] << ", cpu " << expected[b];
  }
  Buffer ragged = device.alloc(MemCategory::Grads, DType::F32, {kNormBlockElems + 1});
  EXPECT_THROW(device.append_block_sumsq(ragged.as<float>(), actual), Error);
}

}  // namespace
}  // namespace zl
