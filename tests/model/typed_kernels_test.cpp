// typed_kernels_test.cpp — the Device kernels on 16-bit tensors (ops/tensor_view.hpp): each gives
// the bits of the fp32 kernel on the widened inputs, its 16-bit output rounded once to nearest
// even, on the CPU device and on the detached one (whose scratch must be device memory); the
// scratch is not booked in the ledger; a tensor of another dtype is a one-line error.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "ops/cpu/detached_cpu_device.hpp"

namespace zl {
namespace {

// fp32 values rounded to `dtype` and back: what a 16-bit tensor of them holds.
std::vector<float> representable(std::vector<float> values, DType dtype) {
  for (float& value : values) {
    if (dtype == DType::BF16) value = bf16_to_f32(f32_to_bf16(value));
    if (dtype == DType::F16) value = f16_to_f32(f32_to_f16(value));
  }
  return values;
}

std::vector<float> random_values(std::size_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& value : values) value = normal(rng);
  return values;
}

// A device buffer of `dtype` holding `values` (rounded to it), and back to the host in fp32.
Buffer upload(Device& device, const std::vector<float>& values, DType dtype) {
  Buffer fp32 = device.alloc(MemCategory::Activations, DType::F32,
                             {static_cast<std::int64_t>(values.size())});
  device.copy_from_host(fp32.data(), values.data(), values.size() * sizeof(float));
  if (dtype == DType::F32) return fp32;
  Buffer typed = device.alloc(MemCategory::Activations, dtype, {fp32.elems()});
  device.convert(fp32.data(), DType::F32, typed.data(), dtype, fp32.elems());
  return typed;
}

std::vector<float> download(Device& device, const Buffer& buffer) {
  Buffer fp32 = device.alloc(MemCategory::Activations, DType::F32, {buffer.elems()});
  device.convert(buffer.data(), buffer.dtype(), fp32.data(), DType::F32, buffer.elems());
  std::vector<float> values(static_cast<std::size_t>(buffer.elems()));
  device.copy_to_host(values.data(), fp32.data(), values.size() * sizeof(float));
  return values;
}

std::vector<std::uint32_t> bits_of(const std::vector<float>& values) {
  std::vector<std::uint32_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

using DeviceMaker = std::function<std::unique_ptr<Device>()>;

struct Case {
  std::string name;
  DeviceMaker make;
};

// gtest names a case by its device.
void PrintTo(const Case& device_case, std::ostream* os) {
  *os << device_case.name;
}

class TypedKernels : public ::testing::TestWithParam<Case> {};

constexpr std::int64_t kRows = 7, kIn = 12, kOut = 9;

// conv1d and linear, forward and backward, with x and w in `dtype` and y in `out_dtype`.
void check_products(Device& device, DType dtype, DType out_dtype) {
  const auto x = representable(random_values(kRows * kIn, 1), dtype);
  const auto w = representable(random_values(kIn * kOut, 2), dtype);
  const auto b = representable(random_values(kOut, 3), dtype);
  const auto dy = random_values(kRows * kOut, 4);
  Buffer x16 = upload(device, x, dtype), w16 = upload(device, w, dtype),
         b16 = upload(device, b, dtype);
  Buffer x32 = upload(device, x, DType::F32), w32 = upload(device, w, DType::F32),
         b32 = upload(device, b, DType::F32), dy32 = upload(device, dy, DType::F32);
  auto zeros = [&](std::int64_t elems, DType type = DType::F32) {
    return device.alloc(MemCategory::Activations, type, {elems});
  };
  for (const bool conv : {true, false}) {
    SCOPED_TRACE(conv ? "conv1d" : "linear");
    auto forward = [&](TensorIn xs, TensorIn ws, TensorIn bs, TensorOut ys) {
      if (conv) return device.conv1d_forward(xs, ws, bs, ys, kRows, kIn, kOut);
      device.linear_forward(xs, ws, bs, ys, kRows, kIn, kOut);
    };
    auto backward = [&](TensorIn xs, TensorIn ws, Buffer& dw, Buffer& db, Buffer& dx) {
      if (conv) {
        return device.conv1d_backward(xs, ws, dy32.as<float>(), dw.as<float>(), db.as<float>(),
                                      dx.as<float>(), kRows, kIn, kOut);
      }
      device.linear_backward(xs, ws, dy32.as<float>(), dw.as<float>(), db.as<float>(),
                             dx.as<float>(), kRows, kIn, kOut);
    };
    Buffer y = zeros(kRows * kOut, out_dtype), y_ref = zeros(kRows * kOut);
    const std::int64_t booked = device.ledger().total_current_bytes();
    forward(x16, w16, b16, y);
    EXPECT_EQ(device.ledger().total_current_bytes(), booked) << "the scratch is not booked";
    forward(x32, w32, b32, y_ref);
    EXPECT_EQ(bits_of(download(device, y)),
              bits_of(representable(download(device, y_ref), out_dtype)));
    Buffer dw = zeros(kIn * kOut), db = zeros(kOut), dx = zeros(kRows * kIn);
    Buffer dw_ref = zeros(kIn * kOut), db_ref = zeros(kOut), dx_ref = zeros(kRows * kIn);
    backward(x16, w16, dw, db, dx);
    backward(x32, w32, dw_ref, db_ref, dx_ref);
    EXPECT_EQ(bits_of(download(device, dw)), bits_of(download(device, dw_ref)));
    EXPECT_EQ(bits_of(download(device, db)), bits_of(download(device, db_ref)));
    EXPECT_EQ(bits_of(download(device, dx)), bits_of(download(device, dx_ref)));
  }
}

TEST_P(TypedKernels, MatrixProductsGiveTheFp32KernelsBitsRoundedOnce) {
  const auto device = GetParam().make();
  for (const DType dtype : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    check_products(*device, dtype, dtype);
    check_products(*device, dtype, DType::F32);  // 16-bit operands, an fp32 output
  }
}

TEST_P(TypedKernels, LayerNormGeluAndAttentionGiveTheFp32KernelsBitsRoundedOnce) {
  const auto device_owner = GetParam().make();
  Device& device = *device_owner;
  constexpr std::int64_t B = 2, T = 5, C = 8, H = 2, N = B * T;
  auto zeros = [&](std::int64_t elems, DType type = DType::F32) {
    return device.alloc(MemCategory::Activations, type, {elems});
  };
  for (const DType dtype : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    // LayerNorm: fp32 x, a 16-bit y.
    Buffer x = upload(device, random_values(N * C, 5), DType::F32);
    Buffer weight = upload(device, random_values(C, 6), DType::F32);
    Buffer bias = upload(device, random_values(C, 7), DType::F32);
    Buffer y = zeros(N * C, dtype), y_ref = zeros(N * C), mean = zeros(N), rstd = zeros(N);
    device.layernorm_forward(x.as<float>(), weight.as<float>(), bias.as<float>(), y,
                             mean.as<float>(), rstd.as<float>(), N, C);
    device.layernorm_forward(x.as<float>(), weight.as<float>(), bias.as<float>(), y_ref,
                             mean.as<float>(), rstd.as<float>(), N, C);
    EXPECT_EQ(bits_of(download(device, y)), bits_of(representable(download(device, y_ref), dtype)));

    // GELU: 16-bit input and output; its backward from the 16-bit input.
    const auto fc = representable(random_values(N * 4 * C, 8), dtype);
    Buffer fc16 = upload(device, fc, dtype), fc32 = upload(device, fc, DType::F32);
    Buffer g = zeros(N * 4 * C, dtype), g_ref = zeros(N * 4 * C);
    device.gelu_tanh_forward(fc16, g);
    device.gelu_tanh_forward(fc32, g_ref);
    EXPECT_EQ(bits_of(download(device, g)), bits_of(representable(download(device, g_ref), dtype)));
    Buffer dg = upload(device, random_values(N * 4 * C, 9), DType::F32);
    Buffer dfc = zeros(N * 4 * C), dfc_ref = zeros(N * 4 * C);
    device.gelu_tanh_backward(fc16, dg.as<float>(), dfc.as<float>());
    device.gelu_tanh_backward(fc32, dg.as<float>(), dfc_ref.as<float>());
    EXPECT_EQ(bits_of(download(device, dfc)), bits_of(download(device, dfc_ref)));

    // Attention: 16-bit qkv and output; backward from both.
    const auto qkv = representable(random_values(N * 3 * C, 10), dtype);
    Buffer qkv16 = upload(device, qkv, dtype), qkv32 = upload(device, qkv, DType::F32);
    Buffer out = zeros(N * C, dtype), out_ref = zeros(N * C);
    Buffer stats = zeros(B * H * T * kAttentionStatsPerRow);
    Buffer stats_ref = zeros(B * H * T * kAttentionStatsPerRow);
    device.attention_forward(qkv16, stats.as<float>(), out, B, T, C, H);
    device.attention_forward(qkv32, stats_ref.as<float>(), out_ref, B, T, C, H);
    EXPECT_EQ(bits_of(download(device, stats)), bits_of(download(device, stats_ref)));
    EXPECT_EQ(bits_of(download(device, out)),
              bits_of(representable(download(device, out_ref), dtype)));
    // Backward reads the output as kept: the reference reads the same rounded values in fp32.
    Buffer out32 = upload(device, download(device, out), DType::F32);
    Buffer dout = upload(device, random_values(N * C, 11), DType::F32);
    Buffer dqkv = zeros(N * 3 * C), dqkv_ref = zeros(N * 3 * C);
    device.attention_backward(qkv16, stats.as<float>(), out, dout.as<float>(), dqkv.as<float>(), B,
                              T, C, H);
    device.attention_backward(qkv32, stats.as<float>(), out32, dout.as<float>(),
                              dqkv_ref.as<float>(), B, T, C, H);
    EXPECT_EQ(bits_of(download(device, dqkv)), bits_of(download(device, dqkv_ref)));
  }
}

TEST_P(TypedKernels, ATensorOfAnotherDtypeIsAOneLineError) {
  const auto device = GetParam().make();
  Buffer ids = device->alloc(MemCategory::Activations, DType::I64, {kRows * kIn});
  Buffer w = device->alloc(MemCategory::Activations, DType::BF16, {kIn * kOut});
  Buffer b = device->alloc(MemCategory::Activations, DType::BF16, {kOut});
  Buffer y = device->alloc(MemCategory::Activations, DType::BF16, {kRows * kOut});
  try {
    device->conv1d_forward(ids, w, b, y, kRows, kIn, kOut);
    FAIL() << "an int64 x was taken";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(), "conv1d_forward: x is int64; kernels take fp32, bf16 or fp16");
  }
  // A 16-bit tensor of the wrong size is refused as an fp32 one is.
  Buffer short_w = device->alloc(MemCategory::Activations, DType::BF16, {kIn * kOut - 1});
  Buffer x = device->alloc(MemCategory::Activations, DType::BF16, {kRows * kIn});
  EXPECT_THROW(device->conv1d_forward(x, short_w, b, y, kRows, kIn, kOut), Error);
}

INSTANTIATE_TEST_SUITE_P(
    Devices, TypedKernels,
    ::testing::Values(Case{"Cpu", [] { return std::unique_ptr<Device>(new CpuDevice()); }},
                      Case{"Detached",
                           [] { return std::unique_ptr<Device>(new DetachedCpuDevice()); }}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace zl
