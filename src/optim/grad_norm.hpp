// grad_norm.hpp — the canonical global gradient norm, independent of the world size: each unit's
// flat gradient is cut into fixed blocks of kNormBlockElems; each block's sum of squares is taken
// in fp64 in index order; a unit's block partials are summed over a pairwise tree fixed by their
// index in the unsharded unit (node (level, i) adds nodes (level - 1, 2i) and (level - 1, 2i + 1),
// blocks past the unit's end count as +0.0); the units' sums are added in unit order. Shards are
// whole blocks, so each rank sums the largest tree nodes inside its own shard (on its device, in
// parallel) and the nodes above them are added from those, in the same tree: the bits of the sum
// depend on neither the world size nor the padding.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace zl {

/// Elements per gradient-norm block. Independent of W.
inline constexpr std::int64_t kNormBlockElems = 64;

/// Appends one fp64 sum of squares per block of `grads` to `partials`.
/// `grads.size()` must be a multiple of kNormBlockElems.
void append_block_sumsq(std::span<const float> grads, std::vector<double>& partials);

/// The same sums, block i into partials[i]: `partials` holds exactly grads.size() /
/// kNormBlockElems doubles.
void block_sumsq(std::span<const float> grads, std::span<double> partials);

/// Throws zl::Error unless `grad_elems` are whole blocks and `partial_elems` is one per block:
/// block_sumsq's arguments, as every device checks them.
void check_block_sumsq(std::size_t grad_elems, std::size_t partial_elems);

/// A node of a unit's pairwise tree: the sum of leaves [index << level, (index + 1) << level).
struct TreeNode {
  int level = 0;           ///< 0: one leaf (a block's partial)
  std::int64_t index = 0;  ///< position among the nodes of its level
  /// The first leaf it sums.
  std::int64_t first_leaf() const { return index << level; }
  /// How many leaves it sums.
  std::int64_t leaves() const { return std::int64_t{1} << level; }
};

/// The largest tree nodes that lie inside leaves [first, first + count), left to right: the
/// nodes a rank holding those leaves sums itself. At most two per level.
std::vector<TreeNode> tree_cover(std::int64_t first, std::int64_t count);

/// The sum of 2^k leaves over their own pairwise tree (a node's value, given its leaves).
double pairwise_sum(std::span<const double> leaves);

/// The values of tree_cover(first_leaf, leaves.size()), in its order, into `sums` (one each):
/// what every device's tree_cover_sums computes.
void tree_cover_sums(std::span<const double> leaves, std::int64_t first_leaf,
                     std::span<double> sums);

/// One holder's part of a unit's leaves: [first_leaf, first_leaf + leaves) and the values of
/// their tree_cover, in its order.
struct TreePiece {
  std::int64_t first_leaf = 0;   ///< the first leaf it holds
  std::int64_t leaves = 0;       ///< how many
  std::span<const double> sums;  ///< tree_cover(first_leaf, leaves)'s values
};

/// A unit's tree sum from pieces that hold its leaves [0, total_leaves) between them, each leaf
/// once (in any order): the nodes above the pieces' covers added in the tree. Throws zl::Error for
/// pieces that overlap, leave a gap or carry the wrong number of sums.
double tree_sum(std::int64_t total_leaves, std::span<const TreePiece> pieces);

/// A whole unit's tree sum from all its leaves (one piece).
double tree_sum(std::span<const double> leaves);

/// sqrt of the units' tree sums added in unit order: the canonical norm.
double norm_from_unit_sums(std::span<const double> unit_sums);

}  // namespace zl
