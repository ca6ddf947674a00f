// typed_kernels_test.cpp — the Device kernels on 16-bit tensors (ops/tensor_view.hpp): each gives
// the bits of the fp32 kernel on the widened inputs, its 16-bit output rounded once to nearest
// even, on the CPU device and on the detached one (whose scratch must be device memory), with
// 16-bit activations and 16-bit parameters; the scratch is not booked in the ledger; a tensor of
// another dtype, or a weight and bias of two, is a one-line error.
#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <ostream>
#include <string>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "ops/cpu/detached_cpu_device.hpp"
#include "support/typed_kernel_checks.hpp"

namespace zl {
namespace {

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

constexpr std::int64_t kRows = test::kTypedRows, kIn = test::kTypedIn, kOut = test::kTypedOut;

TEST_P(TypedKernels, MatrixProductsGiveTheFp32KernelsBitsRoundedOnce) {
  const auto device = GetParam().make();
  for (const DType dtype : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    test::check_products(*device, dtype, dtype);
    test::check_products(*device, dtype, DType::F32);  // 16-bit operands, an fp32 output
  }
}

TEST_P(TypedKernels, TheLossWritesItsScaledGradientOverSixteenBitLogits) {
  const auto device = GetParam().make();
  for (const DType dtype : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    test::check_cross_entropy(*device, dtype);
  }
}

TEST_P(TypedKernels, LayerNormGeluAndAttentionGiveTheFp32KernelsBitsRoundedOnce) {
  const auto device = GetParam().make();
  for (const DType dtype : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    test::check_block_kernels(*device, dtype, 2, 5, 8, 2);
  }
}

TEST_P(TypedKernels, SixteenBitParametersGiveTheFp32KernelsBits) {
  const auto device = GetParam().make();
  for (const DType dtype : {DType::BF16, DType::F16}) {
    SCOPED_TRACE(std::string(dtype_name(dtype)));
    test::check_parameter_kernels(*device, dtype, 2, 5, 8);
  }
}

TEST_P(TypedKernels, TheUpdateReadsReducedGradientsAsTheComposedStepDid) {
  const auto device = GetParam().make();
  test::check_unscaled_reads(*device);
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
  // A unit's tensors read together come in one dtype.
  Buffer x32 = device->alloc(MemCategory::Activations, DType::F32, {kRows * kIn});
  Buffer gamma = device->alloc(MemCategory::Activations, DType::BF16, {kIn});
  Buffer beta = device->alloc(MemCategory::Activations, DType::F32, {kIn});
  Buffer stats = device->alloc(MemCategory::Activations, DType::F32, {kRows});
  try {
    device->layernorm_forward(x32.as<float>(), gamma, beta, x32, stats.as<float>(),
                              stats.as<float>(), kRows, kIn);
    FAIL() << "a bf16 weight with an fp32 bias was taken";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(),
                 "layernorm_forward: weight is bf16 but bias is fp32; pass both in one dtype");
  }
  // A gradient written over logits of another dtype would be half written: refused.
  Buffer logits = device->alloc(MemCategory::Activations, DType::F32, {2 * 4});
  Buffer labels = device->alloc(MemCategory::Activations, DType::I64, {2});
  Buffer sum = device->alloc(MemCategory::CommBuffer, DType::F64, {1});
  try {
    device->cross_entropy_add_forward_backward(logits, labels.as<std::int64_t>(),
                                               TensorOut(logits.data(), 2 * 4, DType::BF16), 2, 4,
                                               4, 2, sum.as<double>());
    FAIL() << "bf16 dlogits over fp32 logits were taken";
  } catch (const Error& error) {
    EXPECT_STREQ(error.what(),
                 "cross_entropy: dlogits written over logits of another dtype (bf16 over fp32): "
                 "pass one dtype");
  }
}

INSTANTIATE_TEST_SUITE_P(
    Devices, TypedKernels,
    ::testing::Values(Case{"Cpu", [] { return std::unique_ptr<Device>(new CpuDevice()); }},
                      Case{"Detached",
                           [] { return std::unique_ptr<Device>(new DetachedCpuDevice()); }}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace zl
