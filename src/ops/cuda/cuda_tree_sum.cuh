// cuda_tree_sum.cuh — the device code of the gradient norm's tree sums (private to src/ops/cuda;
// cuda_step_kernels.cu launches it, tests/cuda_emulation runs it on the CPU): the pairwise tree
// sums of optim/grad_norm.hpp's tree_cover nodes, one block per node, with CpuDevice's bits.
//
// A node of 2^k leaves is cut into kThreads aligned pieces of 2^k / kThreads leaves (one leaf, or
// none past the node's end, when it is smaller): each thread sums its piece over the piece's own
// pairwise tree, closing a node at each trailing one bit of the leaf's index; the warps add their
// lanes' sums with xor shuffles (mask 1, then 2, ..., 16: each step adds two aligned neighbours,
// the tree's next level), and warp 0 adds the warps' sums the same way. An empty piece is +0.0,
// which leaves every sum it joins as it was. Double additions commute exactly, so a lane adding
// its right neighbour's value to its own or the left one's gives the same bits. The kernel has
// internal linkage: each translation unit that launches it has its own.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

/// ZL_DYNAMIC_SHARED_FLOATS(name) declares `name`, the block's dynamic shared memory as floats (an
/// emulator that runs these kernels on the CPU defines it first).
#ifndef ZL_DYNAMIC_SHARED_FLOATS
#define ZL_DYNAMIC_SHARED_FLOATS(name) extern __shared__ float name[]
#endif

namespace zl::cuda::tree_sum {

inline constexpr int kThreadsLog2 = 8;
inline constexpr int kThreads = 1 << kThreadsLog2;  // threads of a node's block
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kMaxNodes = 128;  // a cover has at most two nodes a level
inline constexpr std::size_t kSharedBytes = kWarps * sizeof(double);  // the warps' sums

/// The nodes of one cover: node n sums leaves [offset[n], offset[n] + 2^level[n]) of the array
/// the kernel reads. Passed by value (a kernel parameter).
struct Nodes {
  int count = 0;
  std::int64_t offset[kMaxNodes] = {};
  int level[kMaxNodes] = {};
};

/// The sum of 2^level leaves from `leaves` over their pairwise tree (one thread's piece).
static __device__ double piece_sum(const double* leaves, int level) {
  double pending[64];  // pending[l]: the last node of level l still waiting for its right half
  const std::int64_t count = std::int64_t{1} << level;
  for (std::int64_t j = 0; j < count; ++j) {
    double value = leaves[j];
    int l = 0;
    for (; (j >> l) & 1; ++l) value = pending[l] + value;
    pending[l] = value;
  }
  return pending[level];
}

/// The value of each lane's group of 32 aligned lanes, summed over their pairwise tree.
static __device__ double warp_tree_sum(double value) {
  for (int mask = 1; mask < 32; mask <<= 1)
    value = value + __shfl_xor_sync(0xffffffffu, value, mask);
  return value;
}

/// sums[blockIdx.x] = the pairwise tree sum of node blockIdx.x of `nodes`. Launch with nodes.count
/// blocks of kThreads threads and kSharedBytes of dynamic shared memory.
static __global__ void cover_sums_kernel(const double* leaves, Nodes nodes, double* sums) {
  ZL_DYNAMIC_SHARED_FLOATS(shared);
  auto* warp_sums = reinterpret_cast<double*>(shared);  // [kWarps]
  const int node = static_cast<int>(blockIdx.x);
  const int level = nodes.level[node];
  // each thread's piece: 2^level / kThreads leaves, at least one
  const int piece_level = level > kThreadsLog2 ? level - kThreadsLog2 : 0;
  const std::int64_t first = static_cast<std::int64_t>(threadIdx.x) << piece_level;
  double value = 0.0;
  if (first < (std::int64_t{1} << level)) {
    value = piece_sum(leaves + nodes.offset[node] + first, piece_level);
  }
  value = warp_tree_sum(value);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = value;
  __syncthreads();
  if (threadIdx.x >= 32) return;
  value = threadIdx.x < kWarps ? warp_sums[threadIdx.x] : 0.0;
  value = warp_tree_sum(value);
  if (threadIdx.x == 0) sums[node] = value;
}

}  // namespace zl::cuda::tree_sum
