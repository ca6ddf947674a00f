// cuda_reduce_block.cuh — warp- and block-wide sum and max for the row kernels (private to
// src/ops/cuda): a warp-shuffle tree, then warp 0 combines the warps' partials. Every thread gets
// the result.
// The order of a block sum is fixed by the launch shape, so results repeat run to run; it is not
// the CPU's sequential order (tests/gpu compares within a stated tolerance).
#pragma once

#include <cuda_runtime.h>

namespace zl::cuda {

/// Threads per warp.
inline constexpr int kWarpThreads = 32;

/// Threads per block of the row kernels (LayerNorm, cross-entropy): a multiple of kWarpThreads.
inline constexpr int kRowThreads = 256;

/// Sum over the warp of each lane's `value`, every lane getting it: a butterfly whose order is
/// fixed, so a result repeats run to run. Lane 0 adds exactly as a __shfl_down tree would (at
/// each step its partner, lane `offset`, holds the same partial in both).
template <class T>
__device__ T warp_sum(T value) {
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xFFFFFFFFu, value, offset);
  return value;
}

/// Maximum over the warp of each lane's `value`, every lane getting it (a NaN is kept only where
/// it is the value already held: `other > value` is false for it).
template <class T>
__device__ T warp_max(T value) {
  for (int offset = 16; offset > 0; offset /= 2) {
    const T other = __shfl_xor_sync(0xFFFFFFFFu, value, offset);
    value = other > value ? other : value;
  }
  return value;
}

/// Sum over the block of each thread's `value`; `partials` is shared memory of 32 entries.
/// Every thread of the block must call it.
template <class T>
__device__ T block_sum(T value, T* partials) {
  value = warp_sum(value);
  const int lane = threadIdx.x % kWarpThreads, warp = threadIdx.x / kWarpThreads;
  __syncthreads();  // partials may still be read by a previous call
  if (lane == 0) partials[warp] = value;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + kWarpThreads - 1) / kWarpThreads;
    value = warp_sum(lane < warps ? partials[lane] : T(0));
    __syncwarp();  // every lane has read its partial before lane 0 overwrites partials[0]
    if (lane == 0) partials[0] = value;
  }
  __syncthreads();
  return partials[0];
}

/// Maximum over the block of each thread's `value` (threads with nothing pass -infinity);
/// `partials` is shared memory of 32 entries. Every thread of the block must call it.
template <class T>
__device__ T block_max(T value, T* partials) {
  value = warp_max(value);
  const int lane = threadIdx.x % kWarpThreads, warp = threadIdx.x / kWarpThreads;
  __syncthreads();
  if (lane == 0) partials[warp] = value;
  __syncthreads();
  if (warp == 0) {
    const int warps = (blockDim.x + kWarpThreads - 1) / kWarpThreads;
    value = warp_max(lane < warps ? partials[lane] : partials[0]);
    __syncwarp();  // every lane has read its partial before lane 0 overwrites partials[0]
    if (lane == 0) partials[0] = value;
  }
  __syncthreads();
  return partials[0];
}

/// Blocks of `per_block` items each that cover `items` (at least one block).
inline unsigned int blocks_covering(long long items, long long per_block) {
  const long long blocks = (items + per_block - 1) / per_block;
  return static_cast<unsigned int>(blocks < 1 ? 1 : blocks);
}

/// Blocks for a grid-stride loop over `elems` elements with `threads` per block (capped: the
/// loop covers the rest).
inline unsigned int grid_for(long long elems, int threads) {
  const long long max_elems = 65536LL * threads;  // at most 65536 blocks
  return blocks_covering(elems < max_elems ? elems : max_elems, threads);
}

}  // namespace zl::cuda
