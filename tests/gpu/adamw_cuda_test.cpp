// adamw_cuda_test.cpp — the fused multi-tensor AdamW kernel against optim/adamw.hpp's
// adamw_update: the same bits for every element of every tensor (sizes 0, 1, odd, larger than one
// block's stride; more tensors than one launch takes), several steps, and the bf16 copy equal to
// f32_to_bf16 of the CPU's master; fp16 gradients read as they are and an fp16 copy likewise. A
// NaN matches a NaN whatever its payload.
#include "ops/cuda/adamw_cuda.hpp"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/dtype.hpp"
#include "gpu_test_support.hpp"
#include "optim/adamw.hpp"

namespace zl {
namespace {

bool same_value(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::bit_cast<std::uint32_t>(a) == std::bit_cast<std::uint32_t>(b);
}

struct HostTensor {
  std::vector<float> master, grads, exp_avg, exp_avg_sq;
};

TEST(GpuAdamW, MultiTensorKernelGivesTheCpuBits) {
  ZL_REQUIRE_GPU();
  CudaDevice device(0);
  // 70 tensors: more than one launch's 64; sizes 0, 1, odd, and over the grid's stride.
  std::vector<std::int64_t> sizes = {0, 1, 7, 257, 1000, 2048 * 256 + 3};
  while (sizes.size() < 70) sizes.push_back(static_cast<std::int64_t>(sizes.size() * 37 % 500));
  std::vector<HostTensor> host(sizes.size());
  std::vector<Buffer> master, grads, exp_avg, exp_avg_sq, bf16;
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    const auto n = static_cast<std::size_t>(sizes[t]);
    host[t] = {test::random_floats(n, 100 + t), test::random_floats(n, 200 + t, -1e-2f, 1e-2f),
               test::random_floats(n, 300 + t, -1e-3f, 1e-3f),
               test::random_floats(n, 400 + t, 0.0f, 1e-5f)};
    if (t == 2) {  // the edge values adamw_update must get right too
      host[t].grads = {0.0f,
                       -0.0f,
                       std::numeric_limits<float>::infinity(),
                       std::numeric_limits<float>::quiet_NaN(),
                       std::numeric_limits<float>::denorm_min(),
                       1e30f,
                       -1e-30f};
    }
    master.push_back(test::upload(device, host[t].master, DType::F32, MemCategory::Master));
    grads.push_back(test::upload(device, host[t].grads, DType::F32, MemCategory::Grads));
    exp_avg.push_back(test::upload(device, host[t].exp_avg, DType::F32, MemCategory::Optimizer));
    exp_avg_sq.push_back(
        test::upload(device, host[t].exp_avg_sq, DType::F32, MemCategory::Optimizer));
    bf16.push_back(device.alloc(MemCategory::Params, DType::BF16, {sizes[t]}));
  }
  std::vector<AdamWTensor> tensors;
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    tensors.push_back({.master = master[t].as<float>().data(),
                       .grads = grads[t].as<float>().data(),
                       .exp_avg = exp_avg[t].as<float>().data(),
                       .exp_avg_sq = exp_avg_sq[t].as<float>().data(),
                       .params_half = bf16[t].as<std::uint16_t>().data(),
                       .elems = sizes[t]});
  }
  const AdamWConfig config{.lr = 3e-3, .weight_decay = 0.1};
  for (std::int64_t step = 1; step <= 3; ++step) {
    const AdamWScalars scalars = adamw_scalars(config, step);
    for (auto& t : host) adamw_update(t.master, t.grads, t.exp_avg, t.exp_avg_sq, scalars);
    adamw_update_cuda(tensors, scalars, device.stream());
  }
  for (std::size_t t = 0; t < sizes.size(); ++t) {
    const auto gpu_master = test::download(device, master[t]);
    const auto gpu_m = test::download(device, exp_avg[t]);
    const auto gpu_v = test::download(device, exp_avg_sq[t]);
    const auto gpu_bf16 = test::download<std::uint16_t>(device, bf16[t]);
    for (std::size_t i = 0; i < gpu_master.size(); ++i) {
      ASSERT_TRUE(same_value(gpu_master[i], host[t].master[i]))
          << "tensor " << t << " element " << i << ": master gpu " << gpu_master[i] << ", cpu "
          << host[t].master[i];
      ASSERT_TRUE(same_value(gpu_m[i], host[t].exp_avg[i])) << "tensor " << t << " m " << i;
      ASSERT_TRUE(same_value(gpu_v[i], host[t].exp_avg_sq[i])) << "tensor " << t << " v " << i;
      const std::uint16_t expected = f32_to_bf16(host[t].master[i]);
      ASSERT_TRUE(gpu_bf16[i] == expected ||
                  (std::isnan(bf16_to_f32(gpu_bf16[i])) && std::isnan(bf16_to_f32(expected))))
          << "tensor " << t << " element " << i << ": bf16 gpu " << gpu_bf16[i] << ", cpu "
          << expected;
    }
  }
}

// fp16 gradients (--fp16's reduced ones, unscaled as they are read) and an fp16 copy: the CPU's
// update on the widened gradients divided by the loss scale, and f32_to_f16 of its master.
TEST(GpuAdamW, Fp16GradientsAndCopyAreTheCpusBits) {
  ZL_REQUIRE_GPU();
  CudaDevice device(0);
  constexpr std::size_t kElems = 2048 * 256 + 3;
  constexpr float kLossScale = 1024.0f;
  HostTensor host{test::random_floats(kElems, 1), test::random_floats(kElems, 2, -8.0f, 8.0f),
                  test::random_floats(kElems, 3, -1e-3f, 1e-3f),
                  test::random_floats(kElems, 4, 0.0f, 1e-5f)};
  std::vector<std::uint16_t> grads16(kElems);
  for (std::size_t i = 0; i < kElems; ++i) {
    grads16[i] = f32_to_f16(host.grads[i]);
    host.grads[i] = f16_to_f32(grads16[i]) / kLossScale;  // what the update reads
  }
  Buffer master = test::upload(device, host.master, DType::F32, MemCategory::Master);
  Buffer m = test::upload(device, host.exp_avg, DType::F32, MemCategory::Optimizer);
  Buffer v = test::upload(device, host.exp_avg_sq, DType::F32, MemCategory::Optimizer);
  Buffer grads = device.alloc(MemCategory::Grads, DType::F16, {kElems});
  device.copy_from_host(grads.data(), grads16.data(), kElems * sizeof(std::uint16_t));
  Buffer copy = device.alloc(MemCategory::Params, DType::F16, {kElems});
  const AdamWTensor tensor{.master = master.as<float>().data(),
                           .grads_half = static_cast<const std::uint16_t*>(grads.data()),
                           .exp_avg = m.as<float>().data(),
                           .exp_avg_sq = v.as<float>().data(),
                           .params_half = static_cast<std::uint16_t*>(copy.data()),
                           .elems = kElems};
  const AdamWScalars scalars = adamw_scalars({.lr = 3e-3, .weight_decay = 0.1}, 1);
  adamw_update_cuda(std::span(&tensor, 1), scalars, device.stream(),
                    {.divisor = kLossScale, .half = DType::F16});
  adamw_update(host.master, host.grads, host.exp_avg, host.exp_avg_sq, scalars);
  const auto gpu_master = test::download(device, master);
  const auto gpu_copy = test::download<std::uint16_t>(device, copy);
  for (std::size_t i = 0; i < kElems; ++i) {
    ASSERT_TRUE(same_value(gpu_master[i], host.master[i])) << "master " << i;
    ASSERT_EQ(gpu_copy[i], f32_to_f16(host.master[i])) << "fp16 copy " << i;
  }
}

TEST(GpuAdamW, NullPointerOrAnotherCopyFormatIsAOneLineError) {
  // Checked on the host before any launch: needs no GPU.
  const AdamWTensor tensor{.elems = 5};
  EXPECT_THROW(adamw_update_cuda(std::span(&tensor, 1), adamw_scalars({}, 1), nullptr), Error);
  EXPECT_THROW(adamw_update_cuda({}, adamw_scalars({}, 1), nullptr, {.half = DType::F32}), Error);
}

}  // namespace
}  // namespace zl
