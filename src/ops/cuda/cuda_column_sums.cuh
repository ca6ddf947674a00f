// cuda_column_sums.cuh — what the column sums of cuda_kernels.cu (bias gradients) and
// cuda_layernorm.cu (LayerNorm's weight and bias gradients) share (private to src/ops/cuda): the
// chunk and block shape, and the second step, in which the last block of a column group adds the
// chunks' partials in chunk order.
#pragma once

#include <cstdint>

#include "ops/column_sums.hpp"
#include "ops/cuda/cuda_kernels.hpp"

namespace zl::cuda {

// Column sums keep the CPU's order (ops/column_sums.hpp), so their bits are the CPU's: a block
// takes one chunk of kChunkRows rows of kChunkThreads columns, each thread one column, adding its
// rows in order into the chunk's partial (a warp reads 32 neighbouring columns of a row at once);
// the last of a column group's blocks to finish then adds each column's partials in chunk order.
inline constexpr int kChunkRows = 256;
static_assert(kChunkRows == kColumnSumChunkRows, "a block's rows are one chunk of a column sum");
inline constexpr int kChunkThreads = kColumnSumGroupColumns;

// Rows a thread reads before it adds them: loads in flight, the adds still in row order.
inline constexpr int kBatchRows = 16;

// out[c] = out[c] + (the chunks' partials of column c added in chunk order from zero), in T,
// rounded to float once: the second step of every column sum.
template <class T>
__device__ inline void add_chunk_sums(const T* partials, std::int64_t chunks, float* out,
                                      std::int64_t c, std::int64_t cols) {
  T total = 0;
  for (std::int64_t k = 0; k < chunks; ++k) total += __ldcg(partials + k * cols + c);
  out[c] = static_cast<float>(out[c] + total);
}

// Whether this block is the last of its column group's gridDim.y chunk blocks to finish: each
// block's partials are made visible to the GPU before it counts itself (the last resets the
// count for the next launch). Every thread of the block must call it.
__device__ inline bool last_chunk_block(unsigned* counters) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(counters + blockIdx.x, 1u) == gridDim.y - 1;
    if (last) counters[blockIdx.x] = 0;
  }
  __syncthreads();
  return last;
}

}  // namespace zl::cuda
