// quantized_collectives.cpp — qwZ's quantized all_gather and qgZ's two all_to_alls, on the host.
#include "comm/quantized_collectives.hpp"

#include <cstddef>
#include <vector>

#include "core/error.hpp"

namespace zl {

namespace {

using Bytes = std::vector<std::byte>;

std::size_t as_size(std::int64_t n) {
  return static_cast<std::size_t>(n);
}

// `pieces` arrays of `piece_elems` values, each quantized into its own `piece_bytes` slot of one
// send buffer, for an all_to_all with one piece a rank.
Bytes quantize_pieces(std::span<const float> values, std::int64_t pieces, std::int64_t piece_elems,
                      std::int64_t block_elems, QuantBits bits) {
  const std::int64_t piece_bytes = quantized_bytes(piece_elems, block_elems, bits);
  Bytes out(as_size(pieces * piece_bytes));
  for (std::int64_t p = 0; p < pieces; ++p) {
    quantize_blocks(values.subspan(as_size(p * piece_elems), as_size(piece_elems)), block_elems,
                    bits, std::span(out).subspan(as_size(p * piece_bytes), as_size(piece_bytes)));
  }
  return out;
}

// The received pieces of `recv` (one from each of `pieces` ranks) dequantized and summed in rank
// order, in fp32, into `sum`.
void sum_pieces(const Bytes& recv, std::int64_t pieces, std::span<float> sum,
                std::int64_t block_elems, QuantBits bits) {
  const auto piece_elems = static_cast<std::int64_t>(sum.size());
  const std::int64_t piece_bytes = quantized_bytes(piece_elems, block_elems, bits);
  const auto piece_of = [&](std::int64_t p) {
    return std::span(recv).subspan(as_size(p * piece_bytes), as_size(piece_bytes));
  };
  dequantize_blocks(piece_of(0), block_elems, bits, sum);
  std::vector<float> piece(pieces > 1 ? sum.size() : 0);
  for (std::int64_t p = 1; p < pieces; ++p) {
    dequantize_blocks(piece_of(p), block_elems, bits, piece);
    for (std::size_t i = 0; i < piece.size(); ++i) sum[i] += piece[i];
  }
}

// Sends each rank of `comm` its piece of `send` and returns what every rank sent this one.
Bytes exchange_pieces(Comm& comm, const Bytes& send) {
  Bytes recv(send.size());
  comm.all_to_all(send.data(), recv.data(), send.size() / as_size(comm.size()), DType::I8);
  return recv;
}

}  // namespace

void quantized_all_gather(Comm& comm, std::span<const float> shard, std::int64_t block_elems,
                          QuantBits bits, const ShardSink& take) {
  const auto shard_elems = static_cast<std::int64_t>(shard.size());
  const std::int64_t shard_bytes = quantized_bytes(shard_elems, block_elems, bits);
  Bytes own(as_size(shard_bytes));
  quantize_blocks(shard, block_elems, bits, own);
  Bytes all(as_size(comm.size() * shard_bytes));
  comm.all_gather(own.data(), all.data(), own.size(), DType::I8);
  std::vector<float> values(shard.size());
  for (int r = 0; r < comm.size(); ++r) {
    dequantize_blocks(std::span(all).subspan(as_size(r * shard_bytes), as_size(shard_bytes)),
                      block_elems, bits, values);
    take(r, values);
  }
}

void quantized_reduce_scatter_sum(Comm& node, Comm* across, const BlockSource& blocks,
                                  std::span<float> own_sum, std::int64_t block_elems,
                                  QuantBits bits) {
  const auto locals = static_cast<std::int64_t>(node.size());
  const std::int64_t nodes = across != nullptr ? across->size() : 1;
  const auto shard_elems = static_cast<std::int64_t>(own_sum.size());
  // 1. Local rank j's piece: blocks n L + j of every node n, one after the other, quantized into
  //    its slot of the send buffer one piece at a time.
  const std::int64_t piece_elems = nodes * shard_elems;
  const std::int64_t piece_bytes = quantized_bytes(piece_elems, block_elems, bits);
  std::vector<float> piece(as_size(piece_elems));
  Bytes send(as_size(locals * piece_bytes));
  for (std::int64_t j = 0; j < locals; ++j) {
    for (std::int64_t n = 0; n < nodes; ++n) {
      blocks(n * locals + j, std::span(piece).subspan(as_size(n * shard_elems), own_sum.size()));
    }
    quantize_blocks(piece, block_elems, bits,
                    std::span(send).subspan(as_size(j * piece_bytes), as_size(piece_bytes)));
  }
  const Bytes inside = exchange_pieces(node, send);
  // 2. The node's sum of this rank's piece: the blocks of its local rank on every node.
  std::vector<float>& node_sum = piece;
  sum_pieces(inside, locals, node_sum, block_elems, bits);
  if (across == nullptr) {
    std::copy(node_sum.begin(), node_sum.end(), own_sum.begin());
    return;
  }
  // 3. Node n gets the node sum of its own block; this rank sums the N nodes' in node order.
  const Bytes between =
      exchange_pieces(*across, quantize_pieces(node_sum, nodes, shard_elems, block_elems, bits));
  sum_pieces(between, nodes, own_sum, block_elems, bits);
}

}  // namespace zl
