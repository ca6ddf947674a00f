// cuda_reduce_block.cuh — block-wide sum and max for the row kernels (private to src/ops/cuda):
// a warp-shuffle tree, then warp 0 combines the warps' partials. Every thread gets the result.
// The order of a block sum is fixed by the launch shape, so results repeat run to run; it is not
// the CPU's sequential order (tests/gpu compares within a stated tolerance).
#pragma once

#include <cuda_runtime.h>

namespace zl::cuda {

/// Threads per block of the row kernels (LayerNorm, cross-entropy, attention): a multiple of 32.
inline constexpr int kRowThreads = 256;

/// Sum over the block of each thread's `value`; `partials` is shared memory of 32 entries.
/// Every thread of the block must call it.
template <class T>
__device__ T block_sum(T value, T* partials) {
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_down_sync(0xFFFFFFFFu, value, offset);
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();  // partials may still be read by a previous call
  if (lane == 0) partials[warp] = value;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + 31) / 32;
    value = lane < warps ? partials[lane] : T(0);
    for (int offset = 16; offset > 0; offset /= 2)
      value += __shfl_down_sync(0xFFFFFFFFu, value, offset);
    if (lane == 0) partials[0] = value;
  }
  __syncthreads();
  return partials[0];
}

/// Maximum over the block of each thread's `value` (threads with nothing pass -infinity);
/// `partials` is shared memory of 32 entries. Every thread of the block must call it.
template <class T>
__device__ T block_max(T value, T* partials) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const T other = __shfl_down_sync(0xFFFFFFFFu, value, offset);
    value = other > value ? other : value;
  }
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  __syncthreads();
  if (lane == 0) partials[warp] = value;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + 31) / 32;
    value = lane < warps ? partials[lane] : partials[0];
    for (int offset = 16; offset > 0; offset /= 2) {
      const T other = __shfl_down_sync(0xFFFFFFFFu, value, offset);
      value = other > value ? other : value;
    }
    if (lane == 0) partials[0] = value;
  }
  __syncthreads();
  return partials[0];
}

/// Blocks for a grid-stride loop over `elems` elements with `threads` per block (capped: the
/// loop covers the rest).
inline unsigned int grid_for(long long elems, int threads) {
  const long long blocks = (elems + threads - 1) / threads;
  constexpr long long kMaxBlocks = 65536;
  return static_cast<unsigned int>(blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks));
}

}  // namespace zl::cuda
