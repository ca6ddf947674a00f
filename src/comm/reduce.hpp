// reduce.hpp — the one definition of what a reduction computes, shared by every collective of
// the sim backend and by the reference engine. For each element i:
//   acc = in[0][i]; acc = acc + in[1][i]; ...; acc = acc + in[W-1][i]     (rank order, always)
//   Avg: acc = acc / W                                                     (one division, last)
// fp32 accumulates in float, fp64 in double; bf16 and fp16 accumulate in float and round to the
// 16-bit type once, at the end (nearest even). Max returns NaN if any input is NaN.
// Because the order is fixed per element, all_reduce == reduce_scatter + all_gather bitwise.
//
// A world of nodes (gpus_per_node G, 1 < G < W: ranks nG .. nG+G-1 on node n) sums in two levels,
// as a hierarchical collective does: each node's G inputs in rank order, the node's sum rounded
// to the dtype (the value that crosses between nodes), then the W/G node sums in node order, and
// Avg's one division by W last. With G = 1 or G = W this is the flat order above, bit for bit.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "comm/comm.hpp"
#include "core/dtype.hpp"

namespace zl {

/// All of the world's ranks on one node: the flat rank order.
inline constexpr int kOneNode = 0;

/// The ranks a node holds in a world of `world` ranks: `gpus_per_node`, or the world for kOneNode.
inline int ranks_per_node(int world, int gpus_per_node) {
  return gpus_per_node == kOneNode ? world : gpus_per_node;
}

/// The nodes of a world of `world` ranks, `gpus_per_node` a node (one for kOneNode).
inline int node_count(int world, int gpus_per_node) {
  return world / ranks_per_node(world, gpus_per_node);
}

/// The node of rank `rank`: ranks nG .. nG+G-1 are node n (every rank node 0 for kOneNode).
inline int node_of(int rank, int gpus_per_node) {
  return gpus_per_node == kOneNode ? 0 : rank / gpus_per_node;
}

/// The nodes the ranks `world_ranks` (of a world of `gpus_per_node` a node) span.
int nodes_spanned(const std::vector<int>& world_ranks, int gpus_per_node);

/// Writes into `out` the rank-order reduction of `inputs.size()` arrays of `count` elements, in
/// two levels when `gpus_per_node` splits the inputs into nodes (kOneNode, or G = 1 or G = W:
/// flat). `out` must not overlap any input. Throws zl::Error when `gpus_per_node` does not divide
/// them.
void reduce_rank_order(std::span<const void* const> inputs, void* out, std::size_t count,
                       DType dtype, ReduceOp op, int gpus_per_node = kOneNode);

}  // namespace zl
