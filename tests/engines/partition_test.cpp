// partition_test.cpp — the shard math, with no threads: padding, ownership and block alignment.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "engines/partition.hpp"

namespace zl {
namespace {

std::vector<UnitSpec> units_of(const std::vector<std::int64_t>& sizes) {
  std::vector<UnitSpec> units;
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    units.push_back({fmt::format("u{}", i), {{fmt::format("u{}.w", i), {sizes[i]}}, {fmt::format("u{}.b", i), {1}}}});
  }
  return units;
}

TEST(Partition, PadsToWholeBlocksPerRank) {
  EXPECT_EQ(padded_elems(1, 1), kNormBlockElems);
  EXPECT_EQ(padded_elems(kNormBlockElems, 1), kNormBlockElems);
  EXPECT_EQ(padded_elems(kNormBlockElems + 1, 1), 2 * kNormBlockElems);
  EXPECT_EQ(padded_elems(100, 4), 4 * kNormBlockElems);
  EXPECT_EQ(padded_elems(257, 4), 8 * kNormBlockElems);
  EXPECT_THROW(padded_elems(10, 0), Error);
}

TEST(Partition, RejectsEmptyParameters) {
  std::vector<UnitSpec> units = {{"u", {{"u.w", {3, 0}}}}};
  EXPECT_THROW(layout_units(units, 2), Error);
}

RC_GTEST_PROP(Partition, prop_shards_tile_the_padded_unit, ()) {
  const int world = *rc::gen::inRange(1, 9);
  const auto sizes = *rc::gen::container<std::vector<std::int64_t>>(*rc::gen::inRange(1, 5),
                                                                     rc::gen::inRange<std::int64_t>(1, 2000));
  const auto layout = layout_units(units_of(sizes), world);
  std::int64_t numel_sum = 0;
  for (std::size_t u = 0; u < layout.size(); ++u) {
    const auto& unit = layout[u];
    RC_ASSERT(unit.numel == sizes[u] + 1);
    RC_ASSERT(unit.padded_elems >= unit.numel);
    RC_ASSERT(unit.padded_elems - unit.numel < world * kNormBlockElems);  // minimal padding
    RC_ASSERT(unit.padded_elems % (world * kNormBlockElems) == 0);
    std::int64_t next = 0;
    for (int r = 0; r < world; ++r) {
      const ShardRange shard = shard_of(unit, r, world);
      RC_ASSERT(shard.begin == next);                 // contiguous, in rank order
      RC_ASSERT(shard.size() == unit.shard_elems);    // equal
      RC_ASSERT(shard.begin % kNormBlockElems == 0);  // whole norm blocks
      next = shard.end;
    }
    RC_ASSERT(next == unit.padded_elems);
    RC_ASSERT(unit.params[1].offset_elems == sizes[u]);  // params back to back
    numel_sum += unit.numel;
  }
  RC_ASSERT(total_numel(layout) == numel_sum);
}

}  // namespace
}  // namespace zl
