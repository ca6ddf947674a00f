// checkpoint_test.cpp — the layout on disk (step directories, rank files, manifest, latest), the
// manifest's contents and round trip, and saves that stop before the commit: the previous step
// stays the one that loads, and leftover temporaries are ignored.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "ckpt/checkpoint_support.hpp"
#include "ckpt/reshard.hpp"
#include "ckpt/safetensors.hpp"
#include "ckpt/sha256.hpp"
#include "ckpt/test_files.hpp"

namespace zl {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const MlpConfig kSmall{3, 37, 5, 3};

std::string text_of(const std::filesystem::path& path) {
  const auto bytes = test::file_bytes(path);
  return {bytes.begin(), bytes.end()};
}

TEST(Checkpoint, StepDirectoryHasEightDigits) {
  EXPECT_EQ(step_dir("ckpt", 42), std::filesystem::path("ckpt/step-00000042"));
  EXPECT_EQ(step_dir("ckpt", 123456789), std::filesystem::path("ckpt/step-123456789"));
}

TEST(Checkpoint, LayoutOnDisk) {
  test::TempDir dir;
  test::save_filled(dir.path(), kSmall, 3, 7);
  EXPECT_THAT(dir.entries(), ElementsAre("latest", "step-00000007"));
  EXPECT_EQ(text_of(dir.path() / "latest"), "step-00000007\n");
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path() / "step-00000007")) {
    names.push_back(entry.path().filename().string());
  }
  std::ranges::sort(names);
  EXPECT_THAT(names, ElementsAre("manifest.json", "rank-0.safetensors", "rank-1.safetensors",
                                 "rank-2.safetensors"));
  const auto layout = test::mlp_layout(kSmall, 3);
  const auto rank1 = read_safetensors_file(dir.path() / "step-00000007" / "rank-1.safetensors");
  ASSERT_EQ(rank1.tensors.size(), 9u);
  EXPECT_EQ(rank1.tensors[0].name, "layers.0.params");
  EXPECT_EQ(rank1.tensors[1].name, "layers.0.exp_avg");
  EXPECT_EQ(rank1.tensors[2].name, "layers.0.exp_avg_sq");
  EXPECT_EQ(rank1.tensors[3].shape, Shape{layout[1].shard_elems});
  EXPECT_EQ(rank1.tensors[4].dtype, DType::F32);
  EXPECT_EQ(test::bits(to_floats(rank1.tensors[5])),
            test::bits(test::filled_shards(layout, 1, 3).exp_avg_sq[1]));
  EXPECT_EQ(rank1.metadata.at("rank"), "1");
  EXPECT_EQ(rank1.metadata.at("world"), "3");
  EXPECT_EQ(rank1.metadata.at("run_id"), test::kTestRunId);
}

TEST(Checkpoint, ManifestRecordsTheRunTheLayoutAndEachFile) {
  test::TempDir dir;
  test::save_filled(dir.path(), kSmall, 3, 7);
  const auto step = dir.path() / "step-00000007";
  const auto json = nlohmann::json::parse(text_of(step / "manifest.json"));
  EXPECT_EQ(json["format"], "zerolab-checkpoint");
  EXPECT_EQ(json["format_version"], 2);
  EXPECT_EQ(json["run_id"], test::kTestRunId);
  EXPECT_EQ(json["step"], 7);
  EXPECT_EQ(json["stage"], 2);
  EXPECT_EQ(json["world"], 3);
  EXPECT_EQ(json["model"],
            nlohmann::json::parse(R"({"kind":"mlp","layers":3,"width":37,"in":5,"classes":3})"));
  EXPECT_EQ(json["seed"], 7);
  EXPECT_EQ(json["micro_batch"], 4);
  EXPECT_EQ(json["adamw"]["lr"], 3e-3);
  EXPECT_EQ(json["adamw"]["beta2"], 0.95);
  EXPECT_EQ(json["adamw"]["weight_decay"], 0.1);
  EXPECT_EQ(json["data"]["next_sample"], 7 * 3 * 4);
  EXPECT_EQ(json["units"][1], nlohmann::json::parse(R"({"name":"layers.1","numel":1406,
      "padded_elems":1536,"shard_elems":512,"params":[
      {"name":"layers.1.weight","shape":[37,37],"offset_elems":0},
      {"name":"layers.1.bias","shape":[37],"offset_elems":1369}]})"));
  ASSERT_EQ(json["files"].size(), 3u);
  for (int rank = 0; rank < 3; ++rank) {
    const auto& file = json["files"][static_cast<std::size_t>(rank)];
    const auto path = step / rank_file_name(rank);
    EXPECT_EQ(file["name"], rank_file_name(rank));
    EXPECT_EQ(file["bytes"], std::filesystem::file_size(path));
    EXPECT_EQ(file["sha256"], sha256_file_hex(path));
  }
  // The manifest's own checksum: the SHA-256 of every other key, compact with sorted keys.
  auto content = json;
  content.erase("manifest_sha256");
  const std::string canonical = content.dump();
  EXPECT_EQ(json["manifest_sha256"],
            sha256_hex(std::as_bytes(std::span(canonical.data(), canonical.size()))));
}

TEST(Checkpoint, ManifestRoundTripsThroughJson) {
  test::TempDir dir;
  Manifest manifest = test::save_filled(dir.path(), kSmall, 3, 7);
  manifest.adamw = {1.0 / 3.0, 0.9, 0.999, 1e-8, 0.0};
  manifest.seed = ~std::uint64_t{0};
  const Manifest back = parse_manifest(manifest_json(manifest), "m.json");
  EXPECT_EQ(back.step, manifest.step);
  EXPECT_EQ(back.stage, manifest.stage);
  EXPECT_EQ(back.world, manifest.world);
  EXPECT_EQ(back.seed, manifest.seed);
  EXPECT_EQ(back.micro_batch, manifest.micro_batch);
  EXPECT_EQ(back.adamw.lr, manifest.adamw.lr);
  EXPECT_EQ(back.adamw.eps, manifest.adamw.eps);
  EXPECT_EQ(back.mlp.width, manifest.mlp.width);
  EXPECT_EQ(back.files, manifest.files);
  ASSERT_EQ(back.units.size(), manifest.units.size());
  for (std::size_t u = 0; u < back.units.size(); ++u) {
    EXPECT_EQ(back.units[u].name, manifest.units[u].name);
    EXPECT_EQ(back.units[u].padded_elems, manifest.units[u].padded_elems);
    ASSERT_EQ(back.units[u].params.size(), manifest.units[u].params.size());
    for (std::size_t p = 0; p < back.units[u].params.size(); ++p) {
      EXPECT_EQ(back.units[u].params[p].shape, manifest.units[u].params[p].shape);
      EXPECT_EQ(back.units[u].params[p].numel, manifest.units[u].params[p].numel);
    }
  }
}

TEST(Checkpoint, LatestFollowsTheNewestCommitAndStepsStayReadable) {
  test::TempDir dir;
  test::save_filled(dir.path(), kSmall, 2, 5);
  test::save_filled(dir.path(), kSmall, 4, 10);
  EXPECT_EQ(read_manifest(dir.path()).step, 10);
  EXPECT_EQ(read_manifest(dir.path()).world, 4);
  EXPECT_EQ(read_manifest(step_dir(dir.path(), 5)).step, 5);
  EXPECT_EQ(read_manifest(step_dir(dir.path(), 5)).step_dir, step_dir(dir.path(), 5));
}

// A save that wrote rank files (and a crash that left temporaries) but never committed: the
// previous step is still what loads, bit for bit.
TEST(Checkpoint, InterruptedSaveLeavesThePreviousStepLoadable) {
  test::TempDir dir;
  test::save_filled(dir.path(), kSmall, 3, 5);
  const auto layout = test::mlp_layout(kSmall, 3);
  const auto step10 = step_dir(dir.path(), 10);
  for (int rank = 0; rank < 2; ++rank) {
    ShardState other = test::filled_shards(layout, rank, 3);
    other.params[0][0] = 42.0f;
    write_rank_file(step10, rank, layout, other, test::kTestRunId);
  }
  test::write_file(step10 / "rank-2.safetensors.tmp.4242", {1, 2, 3});
  test::write_file(step10 / "manifest.json.tmp.4242", {'{'});
  test::write_file(dir.path() / "latest.tmp.4242", {'s', 't', 'e', 'p'});
  test::write_file(step_dir(dir.path(), 5) / "rank-0.safetensors.tmp.4242", {9});

  const Manifest manifest = read_manifest(dir.path());
  EXPECT_EQ(manifest.step, 5);
  EXPECT_EQ(manifest.step_dir, step_dir(dir.path(), 5));
  test::expect_bitwise_equal(test::assemble(test::load_all(manifest, kSmall, 3), layout),
                             test::filled_full_state(layout));
  EXPECT_THAT(test::error_of([&] { read_manifest(step10); }),
              HasSubstr("it has neither a latest file nor a manifest.json"));
}

TEST(Checkpoint, ACommittedStepIsNeverRewritten) {
  test::TempDir dir;
  const Manifest manifest = test::save_filled(dir.path(), kSmall, 2, 5);
  const auto before = test::file_bytes(manifest.step_dir / "rank-0.safetensors");
  const auto layout = test::mlp_layout(kSmall, 2);
  EXPECT_THAT(test::error_of([&] {
                write_rank_file(manifest.step_dir, 0, layout, test::filled_shards(layout, 0, 2),
                                test::kTestRunId);
              }),
              HasSubstr("step directory " + manifest.step_dir.string() + " is already committed"));
  EXPECT_THAT(test::error_of([&] { commit_checkpoint(dir.path(), manifest, manifest.files); }),
              HasSubstr("step 5 is already committed"));
  EXPECT_EQ(test::file_bytes(manifest.step_dir / "rank-0.safetensors"), before);
}

TEST(Checkpoint, CommitRefusesMissingFilesAndLeavesLatestAlone) {
  test::TempDir dir;
  test::save_filled(dir.path(), kSmall, 2, 5);
  const auto layout = test::mlp_layout(kSmall, 2);
  const auto step8 = step_dir(dir.path(), 8);
  const FileEntry rank0 =
      write_rank_file(step8, 0, layout, test::filled_shards(layout, 0, 2), test::kTestRunId);
  const std::vector<FileEntry> only_rank0 = {rank0};
  EXPECT_THAT(test::error_of([&] {
                commit_checkpoint(dir.path(), test::test_manifest(kSmall, 2, 8), only_rank0);
              }),
              HasSubstr("it lists 1 files for world 2"));
  const std::vector<FileEntry> both = {rank0, {"rank-1.safetensors", 100, rank0.sha256}};
  EXPECT_THAT(test::error_of(
                  [&] { commit_checkpoint(dir.path(), test::test_manifest(kSmall, 2, 8), both); }),
              HasSubstr("write every rank's file with write_rank_file first"));
  EXPECT_FALSE(std::filesystem::exists(step8 / "manifest.json"));
  EXPECT_EQ(text_of(dir.path() / "latest"), "step-00000005\n");
}

TEST(Checkpoint, WriteRankFileChecksTheStateAgainstTheLayout) {
  test::TempDir dir;
  const auto layout = test::mlp_layout(kSmall, 3);
  ShardState state = test::filled_shards(layout, 0, 3);
  state.exp_avg[1].pop_back();
  EXPECT_THAT(test::error_of(
                  [&] { write_rank_file(dir.path() / "s", 0, layout, state, test::kTestRunId); }),
              HasSubstr("rank 0 gave 511 elements of exp_avg for unit layers.1 but its shards "
                        "hold 512"));
  EXPECT_THAT(test::error_of([&] {
                write_rank_file(dir.path() / "s", 3, layout, test::filled_shards(layout, 0, 3),
                                test::kTestRunId);
              }),
              HasSubstr("rank 3 is outside world 3"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "s"));
}

}  // namespace
}  // namespace zl
