// tree_sum_emulated_test.cpp — the CUDA device's gradient-norm tree sums
// (src/ops/cuda/cuda_tree_sum.cuh), run on the CPU by the emulator in include/, give
// optim/grad_norm.hpp's tree_cover_sums bit for bit: nodes of one leaf, of fewer leaves than the
// block has threads, of several leaves a thread, and of more leaves than a block sums (a second
// pass adds the blocks' sums), from aligned and unaligned first leaves.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ops/cuda/cuda_tree_sum.cuh"
#include "optim/grad_norm.hpp"

namespace zl {
namespace {

using cuda_emulation::emulate;
namespace ts = cuda::tree_sum;

TEST(TreeSumEmulated, CoverSumsAreTheHostsBits) {
  std::mt19937 engine(11);
  // Signs mixed and sizes close: sums cancel, so a rounding anywhere in the tree shows in the root.
  std::uniform_real_distribution<double> mantissa(-1.0, 1.0);
  std::uniform_int_distribution<int> exponent(-3, 3);
  struct Range {
    std::int64_t first, count;
    int passes;  // 2: some node has more leaves than a block sums
  };
  // [5, 8): three nodes of one or two leaves; [0, 1000): 512 + 256 + ... leaves, the largest two
  // leaves a thread; [3, 2051): unaligned, up to 1024 leaves a node (four a thread);
  // [1021, 9213): nodes of up to 4096 leaves, cut into blocks of 1024, then their sums added.
  for (const Range range :
       {Range{5, 3, 1}, Range{0, 1000, 1}, Range{3, 2048, 1}, Range{1021, 8192, 2}}) {
    std::vector<double> leaves(static_cast<std::size_t>(range.count));
    for (double& leaf : leaves) leaf = std::ldexp(mantissa(engine), exponent(engine));
    const std::vector<TreeNode> cover = tree_cover(range.first, range.count);
    std::vector<double> expected(cover.size());
    tree_cover_sums(leaves, range.first, expected);

    ts::Nodes nodes;
    nodes.count = static_cast<int>(cover.size());
    for (std::size_t n = 0; n < cover.size(); ++n) {
      nodes.offset[n] = cover[n].first_leaf() - range.first;
      nodes.level[n] = cover[n].level;
    }
    std::vector<double> sums(cover.size(), std::nan(""));
    const std::int64_t half = (range.count >> ts::kBlockLevel) + ts::kMaxNodes;
    std::vector<double> scratch(static_cast<std::size_t>(2 * half), std::nan(""));
    int passes = 0;
    ts::cover_sums(leaves.data(), nodes, sums.data(), scratch.data(), half,
                   [&](const double* in, const ts::Nodes& pass, double* out) {
                     ++passes;
                     emulate(ts::block_sums_kernel,
                             dim3(static_cast<unsigned>(pass.first_block[pass.count])),
                             dim3(ts::kThreads), ts::kSharedBytes)(in, pass, out);
                   });
    EXPECT_EQ(passes, range.passes);
    for (std::size_t n = 0; n < cover.size(); ++n) {
      EXPECT_EQ(std::bit_cast<std::uint64_t>(sums[n]), std::bit_cast<std::uint64_t>(expected[n]))
          << "leaves [" << range.first << ", +" << range.count << ") node " << n << " (level "
          << cover[n].level << "): " << sums[n] << " against " << expected[n];
    }
  }
}

}  // namespace
}  // namespace zl
