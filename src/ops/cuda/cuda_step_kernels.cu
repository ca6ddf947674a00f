// cuda_step_kernels.cu — the elementwise kernels a training step needs around the Device table:
// residual adds, gradient scaling, bf16 casts and the gradient norm's block sums of squares. Each
// is its host twin's arithmetic, one IEEE-rounded operation per element (no contraction), so the
// GPU gives the same bits as the CPU code it replaces.
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

__global__ void add_inplace_kernel(float* out, const float* addend, std::int64_t elems) {
  for (std::int64_t i = first_index(); i < elems; i += stride()) {
    out[i] = __fadd_rn(out[i], addend[i]);
  }
}

__global__ void scale_inplace_kernel(float* x, float factor, std::int64_t elems) {
  for (std::int64_t i = first_index(); i < elems; i += stride()) x[i] = __fmul_rn(x[i], factor);
}

__global__ void cast_to_bf16_kernel(const float* x, std::uint16_t* out, std::int64_t elems) {
  for (std::int64_t i = first_index(); i < elems; i += stride()) out[i] = to_bf16(x[i]);
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

void add_inplace(float* out, const float* addend, std::int64_t elems, cudaStream_t stream) {
  if (elems == 0) return;
  add_inplace_kernel<<<grid_for(elems, kThreads), kThreads, 0, stream>>>(out, addend, elems);
  cuda_check_launch("add_inplace");
}

void scale_inplace(float* x, float factor, std::int64_t elems, cudaStream_t stream) {
  if (elems == 0) return;
  scale_inplace_kernel<<<grid_for(elems, kThreads), kThreads, 0, stream>>>(x, factor, elems);
  cuda_check_launch("scale_inplace");
}

void cast_to_bf16(const float* x, std::uint16_t* out, std::int64_t elems, cudaStream_t stream) {
  if (elems == 0) return;
  cast_to_bf16_kernel<<<grid_for(elems, kThreads), kThreads, 0, stream>>>(x, out, elems);
  cuda_check_launch("cast_to_bf16");
}

void block_sumsq(const float* grads, double* partials, std::int64_t blocks,
                 std::int64_t block_elems, cudaStream_t stream) {
  if (blocks == 0) return;
  block_sumsq_kernel<<<grid_for(blocks, kThreads), kThreads, 0, stream>>>(grads, partials, blocks,
                                                                          block_elems);
  cuda_check_launch("block_sumsq");
}

}  // namespace zl::cuda
