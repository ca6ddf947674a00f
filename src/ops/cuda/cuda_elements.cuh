// cuda_elements.cuh — what the elementwise and row kernels (cuda_kernels.cu, cuda_layernorm.cu,
// cuda_cross_entropy.cu, cuda_embedding.cu) share (private to src/ops/cuda): a grid-stride loop's
// index and stride, and an element read in fp32 or written from fp32 whether it is kept in fp32,
// bf16 or fp16 (Fp16). A 16-bit element is widened exactly and rounded to nearest even
// (cuda_dtype.cuh), so a kernel on bf16 or fp16 gives the bits of the fp32 kernel between
// Device::convert calls.
#pragma once

#include <cstdint>

#include "ops/cuda/cuda_dtype.cuh"
#include "ops/cuda/fp16_bits.hpp"

namespace zl::cuda {

/// This thread's first index in a grid-stride loop.
__device__ inline std::int64_t global_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
/// The grid-stride loop's step: every thread of the grid.
__device__ inline std::int64_t global_stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

/// An fp32 element.
__device__ inline float get(const float* p) {
  return *p;
}
/// A bf16 element, widened (exact).
__device__ inline float get(const std::uint16_t* p) {
  return from_bf16(*p);
}
/// An fp16 element, widened (exact).
__device__ inline float get(const Fp16* p) {
  return from_f16(p->bits);
}
/// Writes an fp32 element.
__device__ inline void put(float* p, float value) {
  *p = value;
}
/// Writes a bf16 element, rounded to nearest even.
__device__ inline void put(std::uint16_t* p, float value) {
  *p = to_bf16(value);
}
/// Writes an fp16 element, rounded to nearest even.
__device__ inline void put(Fp16* p, float value) {
  p->bits = to_f16(value);
}

}  // namespace zl::cuda
