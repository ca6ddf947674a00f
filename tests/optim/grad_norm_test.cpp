// grad_norm_test.cpp — the gradient norm's pairwise tree (optim/grad_norm.hpp): a unit's leaves
// cut into any number of equal shards, each summed to the largest tree nodes inside it, give the
// whole unit's tree sum bit for bit, with or without zero padding after it; the tree is a real
// order (it differs from adding the leaves one by one), and pieces that do not tile the leaves are
// refused.
#include "optim/grad_norm.hpp"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "core/error.hpp"

namespace zl {
namespace {

// The sum over the definition itself: a node is its left half's sum plus its right half's.
double by_halves(std::span<const double> leaves) {
  if (leaves.size() == 1) return leaves[0];
  const std::size_t half = leaves.size() / 2;
  return by_halves(leaves.first(half)) + by_halves(leaves.subspan(half));
}

// Sums of squares of wildly different sizes, so that the order of the additions shows in the bits.
std::vector<double> random_leaves(std::size_t count, std::uint32_t seed) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<double> mantissa(0.0, 1.0);
  std::uniform_int_distribution<int> exponent(-40, 40);
  std::vector<double> leaves(count);
  for (double& leaf : leaves) leaf = std::ldexp(mantissa(engine), exponent(engine));
  return leaves;
}

// Each of `world` ranks' pieces of `leaves` (zero-padded to a multiple of world), summed by
// tree_cover_sums as a rank's device sums its shard, in a shuffled order.
double sharded_tree_sum(const std::vector<double>& leaves, int world, std::uint32_t seed) {
  const auto shard = static_cast<std::int64_t>((leaves.size() + world - 1) / world);
  std::vector<double> padded = leaves;
  padded.resize(static_cast<std::size_t>(shard * world), 0.0);
  std::vector<std::vector<double>> sums(static_cast<std::size_t>(world));
  std::vector<TreePiece> pieces;
  for (int r = 0; r < world; ++r) {
    const std::int64_t first = r * shard;
    sums[r].resize(tree_cover(first, shard).size());
    tree_cover_sums(std::span<const double>(padded).subspan(static_cast<std::size_t>(first),
                                                            static_cast<std::size_t>(shard)),
                    first, sums[r]);
    pieces.push_back({first, shard, sums[r]});
  }
  std::shuffle(pieces.begin(), pieces.end(), std::mt19937(seed));
  return tree_sum(shard * world, pieces);
}

RC_GTEST_PROP(GradNorm, prop_any_sharding_and_padding_gives_the_whole_units_bits, ()) {
  const auto count = *rc::gen::inRange<std::size_t>(1, 3000);
  const int world = *rc::gen::inRange(1, 9);
  const auto seed = *rc::gen::arbitrary<std::uint32_t>();
  const std::vector<double> leaves = random_leaves(count, seed);
  const double whole = tree_sum(leaves);
  const double sharded = sharded_tree_sum(leaves, world, seed);
  RC_ASSERT(std::bit_cast<std::uint64_t>(sharded) == std::bit_cast<std::uint64_t>(whole));
  std::vector<double> padded = leaves;  // another world's padding: more zero leaves
  padded.resize(count + *rc::gen::inRange<std::size_t>(0, 600), 0.0);
  RC_ASSERT(std::bit_cast<std::uint64_t>(tree_sum(padded)) == std::bit_cast<std::uint64_t>(whole));
}

TEST(GradNorm, ANodeIsItsHalvesAdded) {
  for (const std::size_t count : {1u, 2u, 8u, 256u, 4096u}) {
    const std::vector<double> leaves = random_leaves(count, static_cast<std::uint32_t>(count));
    EXPECT_EQ(std::bit_cast<std::uint64_t>(pairwise_sum(leaves)),
              std::bit_cast<std::uint64_t>(by_halves(leaves)))
        << count << " leaves";
  }
  // Past the last leaf the tree holds +0.0: 5 leaves sum as the first 4 plus the fifth.
  const std::vector<double> five = random_leaves(5, 3);
  EXPECT_EQ(tree_sum(five), by_halves(std::span(five).first(4)) + five[4]);
}

// The order is the tree's, not the leaves': 2^53 + 1 + 1 + 1 added one by one loses every 1
// (each sum ties back to even), the tree adds 1 + 1 first.
TEST(GradNorm, TheTreeIsNotTheLeavesInOrder) {
  const double big = std::ldexp(1.0, 53);
  const std::vector<double> leaves = {big, 1.0, 1.0, 1.0};
  double in_order = 0.0;
  for (const double leaf : leaves) in_order += leaf;
  EXPECT_EQ(in_order, big);
  EXPECT_EQ(tree_sum(leaves), big + 2.0);
}

// tree_cover's nodes tile the range left to right, and none of their parents lies inside it.
TEST(GradNorm, ACoverIsTheLargestNodesInsideTheRange) {
  const std::vector<TreeNode> whole = tree_cover(0, 8);
  ASSERT_EQ(whole.size(), 1u);
  EXPECT_EQ(whole[0].level, 3);
  for (std::int64_t first = 0; first < 40; ++first) {
    for (std::int64_t count = 0; count < 70; ++count) {
      std::int64_t next = first;
      for (const TreeNode& node : tree_cover(first, count)) {
        ASSERT_EQ(node.first_leaf(), next) << first << " + " << count;
        next += node.leaves();
        const TreeNode parent{node.level + 1, node.index / 2};
        EXPECT_TRUE(parent.first_leaf() < first ||
                    parent.first_leaf() + parent.leaves() > first + count)
            << "node (" << node.level << ", " << node.index << ") of [" << first << ", +" << count
            << ") has its parent inside";
      }
      EXPECT_EQ(next, first + count);
    }
  }
}

TEST(GradNorm, PiecesThatDoNotTileTheLeavesAreRefused) {
  const std::vector<double> sums = {1.0};
  const std::vector<double> two = {1.0, 2.0};
  const std::vector<TreePiece> gap = {{0, 1, sums}, {2, 1, sums}};
  EXPECT_THROW(tree_sum(3, gap), Error);
  const std::vector<TreePiece> overlap = {{0, 2, sums}, {1, 1, sums}};
  EXPECT_THROW(tree_sum(3, overlap), Error);
  const std::vector<TreePiece> short_of_total = {{0, 2, sums}};
  EXPECT_THROW(tree_sum(4, short_of_total), Error);
  const std::vector<TreePiece> wrong_sums = {{0, 2, two}};  // [0, 2) is one node
  EXPECT_THROW(tree_sum(2, wrong_sums), Error);
  std::vector<double> out(1);
  EXPECT_THROW(tree_cover_sums(two, 1, out), Error);  // [1, 3) is two nodes
}

}  // namespace
}  // namespace zl
