// typed_kernels_gpu_test.cpp — the CUDA device's kernels on 16-bit tensors (ops/tensor_view.hpp)
// keep Device's contract: its own 16-bit paths (with GEMMs in bf16 or fp16, as --bf16 and --fp16
// run, operands in that format to the tensor cores as kept and outputs rounded as written;
// LayerNorm, GELU, the loss, the embedding and LayerNorm's parameters on bf16 and fp16; the fast
// attention on tensors in its tiles' format, the GEMMs') give the bits of its fp32 paths on the
// widened values, output rounded once; with fp32 GEMMs, and for attention on tensors in the other
// format, Device's default does. The default's scratch is counted by the memory check.
#include <gtest/gtest.h>

#include <string>

#include "gpu_test_support.hpp"
#include "support/typed_kernel_checks.hpp"

namespace zl {
namespace {

TEST(GpuTypedKernels, SixteenBitTensorsGiveTheFp32PathsBitsRoundedOnce) {
  ZL_REQUIRE_GPU();
  CudaDevice gpu(0);
  for (const DType gemms : {DType::BF16, DType::F16, DType::F32}) {
    gpu.set_half_gemms(gemms);
    for (const DType dtype : {DType::BF16, DType::F16}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + ", " + std::string(dtype_name(gemms)) +
                   " GEMMs");
      // 9 outputs a row take the bias kernels' one-column threads, 16 their 8-column ones.
      for (const std::int64_t out : {9, 16}) {
        test::check_products(gpu, dtype, dtype, out);
        test::check_products(gpu, dtype, DType::F32, out);
      }
      test::check_cross_entropy(gpu, dtype);
      // Head size 16 (the fast kernels' with 16-bit GEMMs), two query tiles, one partial.
      test::check_block_kernels(gpu, dtype, 2, 100, 64, 4);
      // The embedding's 16-bit tables and LayerNorm's 16-bit weight and bias, read as kept.
      test::check_parameter_kernels(gpu, dtype, 2, 100, 64);
    }
  }
  gpu.check_memory_ledger();
}

// The fused update's reads of fp32 and bf16 gradients (fp16 through scratch), unscaling and
// clipping as it goes, against the GPU's own composed calls.
TEST(GpuTypedKernels, TheUpdateReadsReducedGradientsAsTheComposedStepDid) {
  ZL_REQUIRE_GPU();
  CudaDevice gpu(0);
  test::check_unscaled_reads(gpu);
  gpu.check_memory_ledger();
}

}  // namespace
}  // namespace zl
