// cuda_step_kernels.cu — the elementwise kernels of a training step (the Device's step work):
// dtype conversions, accumulation, scaling, unscaling and the gradient norm's block sums of
// squares. Each is its host twin's arithmetic (ops/cpu/cpu_step_ops.cpp), one IEEE-rounded
// operation per element (no contraction), so the GPU gives the same bits as the CPU.
#include <cstdint>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_dtype.cuh"
#include "ops/cuda/cuda_kernels.hpp"
#include "ops/cuda/cuda_reduce_block.cuh"

namespace zl::cuda {

namespace {

constexpr int kThreads = 256;

__device__ std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ std::int64_t stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// Element i of a training-dtype array widened to fp32 (exact), as the host's load().
__device__ float load_f32(const void* data, DType dtype, std::int64_t i) {
  switch (dtype) {
    case DType::BF16:
      return from_bf16(static_cast<const std::uint16_t*>(data)[i]);
    case DType::F16:
      return from_f16(static_cast<const std::uint16_t*>(data)[i]);
    default:
      return static_cast<const float*>(data)[i];
  }
}

// Element i of a training-dtype array set to `value` rounded to nearest even, as the host's
// store().
__device__ void store_f32(void* data, DType dtype, std::int64_t i, float value) {
  switch (dtype) {
    case DType::BF16:
      static_cast<std::uint16_t*>(data)[i] = to_bf16(value);
      return;
    case DType::F16:
      static_cast<std::uint16_t*>(data)[i] = to_f16(value);
      return;
    default:
      static_cast<float*>(data)[i] = value;
  }
}

// The dtypes are the same for every thread, so the switches do not diverge.
__global__ void convert_kernel(const void* in, DType in_dtype, void* out, DType out_dtype,
                               std::int64_t elems) {
  for (std::int64_t i = first_index(); i < elems; i += stride()) {
    store_f32(out, out_dtype, i, load_f32(in, in_dtype, i));
  }
}

__global__ void add_kernel(void* acc, const void* addend, DType dtype, std::int64_t elems) {
  for (std::int64_t i = first_index(); i < elems; i += stride()) {
    store_f32(acc, dtype, i, __fadd_rn(load_f32(acc, dtype, i), load_f32(addend, dtype, i)));
  }
}

__global__ void scale_kernel(float* x, float factor, std::int64_t elems) {
  for (std::int64_t i = first_index(); i < elems; i += stride()) x[i] = __fmul_rn(x[i], factor);
}

__global__ void divide_kernel(float* x, float divisor, std::int64_t elems) {
  for (std::int64_t i = first_index(); i < elems; i += stride()) x[i] = __fdiv_rn(x[i], divisor);
}

__global__ void round_to_kernel(float* x, DType dtype, std::int64_t elems) {
  for (std::int64_t i = first_index(); i < elems; i += stride()) {
    std::uint16_t half = 0;
    store_f32(&half, dtype, 0, x[i]);
    x[i] = load_f32(&half, dtype, 0);
  }
}

// optim/grad_norm.cpp's append_block_sumsq, one block of the gradient per thread.
__global__ void block_sumsq_kernel(const float* grads, double* partials, std::int64_t blocks,
                                   std::int64_t block_elems) {
  for (std::int64_t b = first_index(); b < blocks; b += stride()) {
    double sum = 0.0;
    for (std::int64_t i = b * block_elems; i < (b + 1) * block_elems; ++i) {
      const double g = grads[i];
      sum = __dadd_rn(sum, __dmul_rn(g, g));
    }
    partials[b] = sum;
  }
}

}  // namespace

void convert(const void* in, DType in_dtype, void* out, DType out_dtype, std::int64_t elems,
             cudaStream_t stream) {
  if (elems == 0) return;
  convert_kernel<<<grid_for(elems, kThreads), kThreads, 0, stream>>>(in, in_dtype, out, out_dtype,
                                                                     elems);
  cuda_check_launch("convert");
}

void add(void* acc, const void* addend, DType dtype, std::int64_t elems, cudaStream_t stream) {
  if (elems == 0) return;
  add_kernel<<<grid_for(elems, kThreads), kThreads, 0, stream>>>(acc, addend, dtype, elems);
  cuda_check_launch("add");
}

void scale(float* x, float factor, std::int64_t elems, cudaStream_t stream) {
  if (elems == 0) return;
  scale_kernel<<<grid_for(elems, kThreads), kThreads, 0, stream>>>(x, factor, elems);
  cuda_check_launch("scale");
}

void divide(float* x, float divisor, std::int64_t elems, cudaStream_t stream) {
  if (elems == 0) return;
  divide_kernel<<<grid_for(elems, kThreads), kThreads, 0, stream>>>(x, divisor, elems);
  cuda_check_launch("divide");
}

void round_to(float* x, DType dtype, std::int64_t elems, cudaStream_t stream) {
  if (elems == 0) return;
  round_to_kernel<<<grid_for(elems, kThreads), kThreads, 0, stream>>>(x, dtype, elems);
  cuda_check_launch("round_to");
}

void block_sumsq(const float* grads, double* partials, std::int64_t blocks,
                 std::int64_t block_elems, cudaStream_t stream) {
  if (blocks == 0) return;
  block_sumsq_kernel<<<grid_for(blocks, kThreads), kThreads, 0, stream>>>(grads, partials, blocks,
                                                                          block_elems);
  cuda_check_launch("block_sumsq");
}

}  // namespace zl::cuda
