// grad_norm.cpp — block sums of squares, their pairwise tree and the ordered total.
#include "optim/grad_norm.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace zl {

void append_block_sumsq(std::span<const float> grads, std::vector<double>& partials) {
  const std::size_t first = partials.size();
  partials.resize(first + grads.size() / kNormBlockElems);
  block_sumsq(grads, std::span<double>(partials).subspan(first));
}

void check_block_sumsq(std::size_t grad_elems, std::size_t partial_elems) {
  ZL_CHECK(grad_elems % kNormBlockElems == 0,
           "gradient span of {} elements is not whole blocks of {}: pad units with layout_units",
           grad_elems, kNormBlockElems);
  ZL_CHECK(partial_elems == grad_elems / kNormBlockElems,
           "block_sumsq: {} partials for {} blocks: pass one per block", partial_elems,
           grad_elems / kNormBlockElems);
}

void block_sumsq(std::span<const float> grads, std::span<double> partials) {
  check_block_sumsq(grads.size(), partials.size());
  for (std::size_t b = 0; b < partials.size(); ++b) {
    double sum = 0.0;
    for (std::size_t i = b * kNormBlockElems; i < (b + 1) * kNormBlockElems; ++i) {
      const double g = grads[i];
      sum += g * g;
    }
    partials[b] = sum;
  }
}

std::vector<TreeNode> tree_cover(std::int64_t first, std::int64_t count) {
  ZL_CHECK(first >= 0 && count >= 0, "tree_cover: leaves [{}, {} + {}) are not a range", first,
           first, count);
  std::vector<TreeNode> nodes;
  const std::int64_t end = first + count;
  while (first < end) {
    int level = 0;  // the largest aligned node starting at `first` that ends by `end`
    while (first % (std::int64_t{2} << level) == 0 && first + (std::int64_t{2} << level) <= end) {
      ++level;
    }
    nodes.push_back({level, first >> level});
    first += std::int64_t{1} << level;
  }
  return nodes;
}

double pairwise_sum(std::span<const double> leaves) {
  const std::size_t n = leaves.size();
  ZL_CHECK(n > 0 && (n & (n - 1)) == 0, "pairwise_sum: {} leaves is not a power of two", n);
  // Leaf j closes one node per trailing one bit of j: each node is its two halves added.
  double pending[64];  // pending[l]: the last node of level l still waiting for its right half
  int top = 0;
  for (std::size_t j = 0; j < n; ++j) {
    double value = leaves[j];
    int level = 0;
    for (; (j >> level) & 1; ++level) value = pending[level] + value;
    pending[level] = value;
    top = level;
  }
  return pending[top];
}

void tree_cover_sums(std::span<const double> leaves, std::int64_t first_leaf,
                     std::span<double> sums) {
  const std::vector<TreeNode> cover =
      tree_cover(first_leaf, static_cast<std::int64_t>(leaves.size()));
  ZL_CHECK(sums.size() == cover.size(),
           "tree_cover_sums: {} sums for the {} nodes covering leaves [{}, {}): pass one per node",
           sums.size(), cover.size(), first_leaf, first_leaf + std::ssize(leaves));
  for (std::size_t i = 0; i < cover.size(); ++i) {
    sums[i] =
        pairwise_sum(leaves.subspan(static_cast<std::size_t>(cover[i].first_leaf() - first_leaf),
                                    static_cast<std::size_t>(cover[i].leaves())));
  }
}

namespace {

// A unit's pieces, each with its cover, for the walk down from the root.
class TreeWalk {
 public:
  TreeWalk(std::int64_t total_leaves, std::span<const TreePiece> pieces)
      : total_(total_leaves), pieces_(pieces.begin(), pieces.end()) {
    std::ranges::sort(pieces_, {}, &TreePiece::first_leaf);
    std::int64_t next = 0;
    for (const TreePiece& piece : pieces_) {
      ZL_CHECK(piece.first_leaf == next && piece.leaves >= 0,
               "tree_sum: a piece holds leaves from {} where leaf {} was next: the pieces must "
               "hold leaves [0, {}) once each",
               piece.first_leaf, next, total_leaves);
      covers_.push_back(tree_cover(piece.first_leaf, piece.leaves));
      ZL_CHECK(piece.sums.size() == covers_.back().size(),
               "tree_sum: the piece at leaf {} carries {} sums for {} cover nodes",
               piece.first_leaf, piece.sums.size(), covers_.back().size());
      next += piece.leaves;
    }
    ZL_CHECK(next == total_leaves, "tree_sum: the pieces hold {} leaves of {}", next, total_leaves);
  }

  double root() const {
    int level = 0;
    while ((std::int64_t{1} << level) < total_) ++level;
    return value(TreeNode{level, 0});
  }

 private:
  // A node inside one piece is in that piece's cover (its parent is not inside: the walk would
  // have stopped there); a node past the leaves is +0.0; any other adds its two halves.
  double value(const TreeNode& node) const {
    if (node.first_leaf() >= total_) return 0.0;
    for (std::size_t p = 0; p < pieces_.size(); ++p) {
      const TreePiece& piece = pieces_[p];
      if (node.first_leaf() < piece.first_leaf ||
          node.first_leaf() + node.leaves() > piece.first_leaf + piece.leaves) {
        continue;
      }
      const std::vector<TreeNode>& cover = covers_[p];
      for (std::size_t i = 0; i < cover.size(); ++i) {
        if (cover[i].level == node.level && cover[i].index == node.index) return piece.sums[i];
      }
      fail("tree_sum: node ({}, {}) lies in a piece but not in its cover", node.level, node.index);
    }
    ZL_CHECK(node.level > 0, "tree_sum: leaf {} lies in no piece", node.index);
    return value({node.level - 1, 2 * node.index}) + value({node.level - 1, 2 * node.index + 1});
  }

  std::int64_t total_;
  std::vector<TreePiece> pieces_;
  std::vector<std::vector<TreeNode>> covers_;
};

}  // namespace

double tree_sum(std::int64_t total_leaves, std::span<const TreePiece> pieces) {
  return TreeWalk(total_leaves, pieces).root();
}

double tree_sum(std::span<const double> leaves) {
  const auto total = static_cast<std::int64_t>(leaves.size());
  std::vector<double> sums(tree_cover(0, total).size());
  tree_cover_sums(leaves, 0, sums);
  const TreePiece whole{0, total, sums};
  return tree_sum(total, std::span<const TreePiece>(&whole, 1));
}

double norm_from_unit_sums(std::span<const double> unit_sums) {
  double total = 0.0;
  for (const double sum : unit_sums) total += sum;
  return std::sqrt(total);
}

}  // namespace zl
