// cuda_tree_sum.cuh — the device code of the gradient norm's tree sums (private to src/ops/cuda;
// cuda_step_kernels.cu launches it, tests/cuda_emulation runs it on the CPU): the pairwise tree
// sums of optim/grad_norm.hpp's tree_cover nodes, with CpuDevice's bits.
//
// A node's pairwise tree is the tree over its aligned sub-nodes of any one size, so a node larger
// than a block's 2^kBlockLevel leaves is cut into sub-nodes of that size, one block each, spread
// over the GPU; a next pass sums each node's sub-node sums as a node of their own (level smaller
// by kBlockLevel), until every node fits one block (cover_sums runs the passes).
//
// In a block, a sub-node of 2^k leaves is cut into kThreads aligned pieces of up to four leaves
// (one leaf, or none past the sub-node's end, when it is smaller): each thread adds its piece's
// pairs, the warps add their lanes' sums with xor shuffles (mask 1, then 2, ..., 16: each step
// adds two aligned neighbours, the tree's next level), and warp 0 adds the warps' sums the same
// way. An empty piece is +0.0, which leaves every sum it joins as it was. Double additions
// commute exactly, so a lane adding its right neighbour's value to its own or the left one's
// gives the same bits. The kernel has internal linkage: each translation unit that launches it
// has its own.
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
inline constexpr int kThreads = 1 << kThreadsLog2;  // threads of a block
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kPieceLevel = 2;                           // up to 4 leaves a thread
inline constexpr int kBlockLevel = kThreadsLog2 + kPieceLevel;  // up to 1024 leaves a block
inline constexpr int kMaxNodes = 128;  // a cover has at most two nodes a level
inline constexpr std::size_t kSharedBytes = kWarps * sizeof(double);  // the warps' sums

/// The nodes of one pass: node n sums leaves [offset[n], offset[n] + 2^level[n]) of the array the
/// kernel reads, in blocks first_block[n] .. first_block[n + 1] - 1, each a sub-node of
/// 2^block_level[n] leaves. Passed by value (a kernel parameter).
struct Nodes {
  int count = 0;
  std::int64_t offset[kMaxNodes] = {};
  int level[kMaxNodes] = {};
  int block_level[kMaxNodes] = {};
  int first_block[kMaxNodes + 1] = {};
};

/// `nodes` with each node's blocks laid out: sub-nodes of at most 2^kBlockLevel leaves.
inline Nodes with_blocks(Nodes nodes) {
  nodes.first_block[0] = 0;
  for (int n = 0; n < nodes.count; ++n) {
    nodes.block_level[n] = nodes.level[n] < kBlockLevel ? nodes.level[n] : kBlockLevel;
    nodes.first_block[n + 1] =
        nodes.first_block[n] + (1 << (nodes.level[n] - nodes.block_level[n]));
  }
  return nodes;
}

/// The next pass's nodes over the block sums a pass of `done` wrote: node n's sub-node sums, as a
/// node of level - block_level.
inline Nodes next_pass(const Nodes& done) {
  Nodes next;
  next.count = done.count;
  for (int n = 0; n < done.count; ++n) {
    next.offset[n] = done.first_block[n];
    next.level[n] = done.level[n] - done.block_level[n];
  }
  return with_blocks(next);
}

/// Whether every node of `nodes` fits one block (its pass writes the nodes' sums).
inline bool last_pass(const Nodes& nodes) {
  return nodes.first_block[nodes.count] == nodes.count;
}

/// The sum of 2^level leaves (level at most kPieceLevel) over their pairwise tree.
static __device__ double piece_sum(const double* leaves, int level) {
  if (level == 0) return leaves[0];
  if (level == 1) return leaves[0] + leaves[1];
  return (leaves[0] + leaves[1]) + (leaves[2] + leaves[3]);
}

/// The value of each lane's group of 32 aligned lanes, summed over their pairwise tree.
static __device__ double warp_tree_sum(double value) {
  for (int mask = 1; mask < 32; mask <<= 1)
    value = value + __shfl_xor_sync(0xffffffffu, value, mask);
  return value;
}

/// sums[b] = the pairwise tree sum of block b's sub-node of `nodes` (with_blocks). Launch with
/// nodes.first_block[nodes.count] blocks of kThreads threads and kSharedBytes of dynamic shared
/// memory.
static __global__ void block_sums_kernel(const double* leaves, Nodes nodes, double* sums) {
  ZL_DYNAMIC_SHARED_FLOATS(shared);
  auto* warp_sums = reinterpret_cast<double*>(shared);  // [kWarps]
  const int block = static_cast<int>(blockIdx.x);
  int node = 0;
  while (nodes.first_block[node + 1] <= block) ++node;
  const int level = nodes.block_level[node];
  const std::int64_t first_leaf =
      nodes.offset[node] + (static_cast<std::int64_t>(block - nodes.first_block[node]) << level);
  // each thread's piece: 2^level / kThreads leaves, at least one
  const int piece_level = level > kThreadsLog2 ? level - kThreadsLog2 : 0;
  const int first = static_cast<int>(threadIdx.x) << piece_level;
  double value = 0.0;
  if (first < (1 << level)) value = piece_sum(leaves + first_leaf + first, piece_level);
  value = warp_tree_sum(value);
  if (threadIdx.x % 32 == 0) warp_sums[threadIdx.x / 32] = value;
  __syncthreads();
  if (threadIdx.x >= 32) return;
  value = threadIdx.x < kWarps ? warp_sums[threadIdx.x] : 0.0;
  value = warp_tree_sum(value);
  if (threadIdx.x == 0) sums[block] = value;
}

/// sums[n] = the pairwise tree sum of node n of `nodes` (offset and level set, blocks not yet),
/// through launch(leaves, pass_nodes, out) for each pass, which runs block_sums_kernel over
/// pass_nodes.first_block[count] blocks. `scratch` holds two passes' block sums: at least
/// 2 * (the leaves / 2^kBlockLevel + 2 * count) doubles.
template <class Launch>
void cover_sums(const double* leaves, Nodes nodes, double* sums, double* scratch,
                std::int64_t scratch_half, Launch&& launch) {
  nodes = with_blocks(nodes);
  const double* in = leaves;
  for (int pass = 0;; ++pass) {
    double* out = last_pass(nodes) ? sums : scratch + (pass % 2) * scratch_half;
    launch(in, nodes, out);
    if (out == sums) return;
    in = out;
    nodes = next_pass(nodes);
  }
}

}  // namespace zl::cuda::tree_sum
