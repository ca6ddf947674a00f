// quantized_collectives.hpp — ZeRO++'s quantized communication over any Comm with all_gather and
// all_to_all, on host memory (quantize.hpp's blocks and bytes):
//   qwZ  quantized_all_gather: each rank quantizes its shard, the int8 bytes are all_gathered,
//        every rank dequantizes the W shards into the whole array.
//   qgZ  quantized_reduce_scatter_sum: the hierarchical all-to-all reduce. Inside each node every
//        rank quantizes, for each of the node's L ranks, the blocks that rank will sum for the
//        other nodes and itself, and an all_to_all delivers them; each rank dequantizes its L
//        pieces and sums them (fp32, local-rank order). Across the nodes each rank quantizes that
//        node sum again, one piece a node, and a second all_to_all among the ranks with its local
//        rank delivers them; it dequantizes its N pieces and sums them in node order. Only int4
//        or int8 bytes and their scales cross between nodes, once.
// Neither is bitwise an exact collective; both are deterministic (fixed blocks, fixed orders), and
// each value is within the closed-form bound of its blocks (quantization_error_bound).
#pragma once

#include <cstdint>
#include <functional>
#include <span>

#include "comm/comm.hpp"
#include "comm/quantize.hpp"

namespace zl {

/// Where the dequantized shards of a gather go: `take(r, values)` receives rank r's shard.
using ShardSink = std::function<void(int rank, std::span<const float> values)>;

/// Where a reduce reads the world's blocks of its input: `fill(b, out)` writes block b (of W).
using BlockSource = std::function<void(std::int64_t block, std::span<float> out)>;

/// qwZ's gather: every rank's `shard`, quantized in blocks of `block_elems` (from the start of
/// its shard) with `bits`, gathered and handed to `take` dequantized, rank by rank in rank
/// order; only the quantized bytes and one shard of values are held at once. Every rank passes
/// a shard of the same size.
void quantized_all_gather(Comm& comm, std::span<const float> shard, std::int64_t block_elems,
                          QuantBits bits, const ShardSink& take);

/// qgZ's reduce: `full` is this rank's array of W = N x L blocks of S = own_sum.size() elements,
/// block n L + l belonging to world rank n L + l (rank l of node n). `node` is this rank's node
/// (L ranks, in world order); `across` the ranks of its local rank on every node (N ranks, in
/// node order), or null when the world is one node. `own_sum` gets the world's sum of this
/// rank's block:
///   1. for each local rank j, the piece of blocks n L + j for n = 0..N-1 (N S elements) is
///      quantized in blocks of `block_elems` from the piece's start, and all_to_all'd in `node`
///   2. the L pieces received are dequantized and summed in local-rank order, in fp32
///   3. with N > 1: that node sum, cut in N pieces of S, each quantized the same way, is
///      all_to_all'd in `across`, and the N pieces received are dequantized and summed in node
///      order, in fp32
/// Non-finite gradients come back non-finite (quantize.hpp). `blocks` gives the W blocks of this
/// rank's array, one piece's at a time: the host holds one piece of values and the quantized
/// bytes, never the whole array.
void quantized_reduce_scatter_sum(Comm& node, Comm* across, const BlockSource& blocks,
                                  std::span<float> own_sum, std::int64_t block_elems,
                                  QuantBits bits);

}  // namespace zl
