// reshard_test.cpp — the piece math on its own, then checkpoints loaded into other world sizes:
// the full unpadded state assembled from the new shards equals the saved one bit for bit
// (resharding only moves elements), and new padding is zero. A checkpoint of another model is
// refused.
#include "ckpt/reshard.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ckpt/checkpoint_support.hpp"
#include "ckpt/test_files.hpp"

namespace zl {
namespace {

using ::testing::HasSubstr;

// Units of 222, 1406 and 114 elements: none a multiple of 64, so every world pads.
const MlpConfig kSmall{3, 37, 5, 3};

// A unit of `numel` elements laid out for `world`.
UnitLayout unit_of(std::int64_t numel, int world) {
  return layout_units({{"u", {{"u.w", {numel}}}}}, world).front();
}

TEST(PiecesOf, SplitsARangeAtShardBoundaries) {
  const UnitLayout unit = unit_of(200, 3);  // padded to 384, shards of 128
  ASSERT_EQ(unit.shard_elems, 128);
  EXPECT_EQ(pieces_of(unit, 3, {0, 200}),
            (std::vector<ShardPiece>{{0, 0, 0, 128}, {1, 0, 128, 72}}));
  EXPECT_EQ(pieces_of(unit, 3, {100, 150}),
            (std::vector<ShardPiece>{{0, 100, 0, 28}, {1, 0, 28, 22}}));
}

TEST(PiecesOf, ListsNoPaddingAndNothingPastNumel) {
  const UnitLayout unit = unit_of(200, 3);
  EXPECT_EQ(pieces_of(unit, 3, {192, 384}), (std::vector<ShardPiece>{{1, 64, 0, 8}}));
  EXPECT_TRUE(pieces_of(unit, 3, {200, 384}).empty());
  EXPECT_TRUE(pieces_of(unit, 3, {50, 50}).empty());
}

TEST(PiecesOf, RefusesAUnitLaidOutForAnotherWorld) {
  EXPECT_THAT(test::error_of([] {
                pieces_of(unit_of(200, 3), 2, {0, 10});
              }),
              HasSubstr("is not laid out for world 2"));
}

// Saves the fill state at `old_world`, loads it at `new_world` and compares the full states.
void expect_reshard_exact(int old_world, int new_world) {
  test::TempDir dir;
  const Manifest manifest = test::save_filled(dir.path(), kSmall, old_world, 3);
  const auto new_layout = test::mlp_layout(kSmall, new_world);
  const auto shards = test::load_all(manifest, kSmall, new_world);
  test::expect_bitwise_equal(test::assemble(shards, new_layout),
                             test::filled_full_state(new_layout));
}

TEST(Reshard, SameWorldGivesEachRankItsOwnShardsBitwise) {
  test::TempDir dir;
  const int world = 4;
  const Manifest manifest = test::save_filled(dir.path(), kSmall, world, 3);
  const auto layout = test::mlp_layout(kSmall, world);
  for (int rank = 0; rank < world; ++rank) {
    const ShardState saved = test::filled_shards(layout, rank, world);
    const ShardState loaded = load_rank_shards(manifest, layout, rank, world);
    for (const ShardTensor tensor : kShardTensors) {
      for (std::size_t u = 0; u < layout.size(); ++u) {
        EXPECT_EQ(test::bits(shard_member(loaded, tensor)[u]),
                  test::bits(shard_member(saved, tensor)[u]))
            << "rank " << rank << " unit " << u << " " << shard_tensor_suffix(tensor);
      }
    }
  }
}

TEST(Reshard, World3To2) {
  expect_reshard_exact(3, 2);
}
TEST(Reshard, World4To8) {
  expect_reshard_exact(4, 8);
}
TEST(Reshard, World5To1) {
  expect_reshard_exact(5, 1);
}
TEST(Reshard, World1To5) {
  expect_reshard_exact(1, 5);
}

TEST(Reshard, EveryPairOfWorldsUpTo6) {
  for (int old_world = 1; old_world <= 6; ++old_world) {
    for (int new_world = 1; new_world <= 6; ++new_world) {
      SCOPED_TRACE(testing::Message() << "world " << old_world << " -> " << new_world);
      expect_reshard_exact(old_world, new_world);
    }
  }
}

TEST(Reshard, RefusesAnotherModelNamingTheDifference) {
  test::TempDir dir;
  const Manifest manifest = test::save_filled(dir.path(), kSmall, 2, 3);
  const std::string shown = (manifest.step_dir / "manifest.json").string();
  const auto load_into = [&](const MlpConfig& config) {
    return test::error_of([&] { load_rank_shards(manifest, test::mlp_layout(config, 2), 0, 2); });
  };
  EXPECT_EQ(load_into({3, 36, 5, 3}),
            "cannot load " + shown +
                ": it holds another model: parameter \"layers.0.weight\" has shape [37, 5] in the "
                "checkpoint but [36, 5] in the model: load it into the model it was saved from "
                "(mlp: layers 3, width 37, in 5, classes 3)");
  EXPECT_THAT(load_into({4, 37, 5, 3}), HasSubstr(": the checkpoint has 3 units, the model 4: "));
  auto renamed = test::mlp_layout(kSmall, 2);
  renamed[1].name = "blocks.1";
  EXPECT_THAT(test::error_of([&] { load_rank_shards(manifest, renamed, 0, 2); }),
              HasSubstr("unit 1 is \"layers.1\" in the checkpoint but \"blocks.1\" in the model"));
  // The same parameter with padded rows: a checkpoint from before the vocabulary was padded.
  auto padded = test::mlp_layout(kSmall, 2);
  padded[0].params[0].shape.front() += 3;
  padded[0].params[0].pad_rows = 3;
  EXPECT_EQ(
      test::error_of([&] { load_rank_shards(manifest, padded, 0, 2); }),
      "cannot load " + shown +
          ": parameter \"layers.0.weight\" is saved unpadded, [37, 5], by a zerolab from "
          "before the vocabulary was padded to a multiple of 128 (this model holds [40, 5]): "
          "consolidate the checkpoint with the zerolab that wrote it and start from that file "
          "with --init");
}

}  // namespace
}  // namespace zl
