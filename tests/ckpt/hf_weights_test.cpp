// hf_weights_test.cpp — a Hugging Face folder's weights (read_hf_weights): one model.safetensors,
// or shards with their index holding the same tensors; a missing shard, a tensor its shard lacks,
// a weight_map outside the folder, a folder of PyTorch pickles and an empty folder are one-line
// errors naming the file.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "ckpt/hf_folder.hpp"
#include "ckpt/test_files.hpp"
#include "support/hf_shards.hpp"
#include "support/test_paths.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;

const fs::path kFixture = fs::path(zl::test::data_dir()) / "fixtures" / "hf_tiny_gpt2";

// The tensors by name.
std::map<std::string, HfTensor> by_name(std::vector<HfTensor> tensors) {
  std::map<std::string, HfTensor> named;
  for (auto& tensor : tensors) named.emplace(tensor.record.name, std::move(tensor));
  return named;
}

TEST(HfWeights, TwoShardsHoldWhatModelSafetensorsHolds) {
  const test::TempDir dir;
  const nlohmann::json index = test::write_two_shards(kFixture, dir.path());
  const auto whole = by_name(read_hf_weights(kFixture));
  const auto sharded = by_name(read_hf_weights(dir.path()));
  ASSERT_EQ(sharded.size(), whole.size());
  for (const auto& [name, tensor] : whole) {
    ASSERT_TRUE(sharded.contains(name)) << name;
    const HfTensor& shard_tensor = sharded.at(name);
    EXPECT_EQ(tensor.file, kFixture / kHfWeightsFile);
    EXPECT_EQ(shard_tensor.file, dir.path() / index["weight_map"][name].get<std::string>());
    EXPECT_EQ(shard_tensor.record.dtype, tensor.record.dtype) << name;
    EXPECT_EQ(shard_tensor.record.shape, tensor.record.shape) << name;
    EXPECT_EQ(shard_tensor.record.bytes, tensor.record.bytes) << name;
  }
  // Each tensor comes from the shard the map names: a copy of it left in the other shard is not
  // read.
  const std::string moved = whole.begin()->first;
  auto first = read_safetensors(dir.path() / test::kFirstShard);
  auto second = read_safetensors(dir.path() / test::kSecondShard);
  ASSERT_EQ(index["weight_map"][moved], test::kFirstShard);
  TensorRecord decoy = whole.at(moved).record;
  std::ranges::fill(decoy.bytes, std::byte{0});
  second.push_back(decoy);
  write_safetensors(dir.path() / test::kSecondShard, second);
  EXPECT_EQ(by_name(read_hf_weights(dir.path())).at(moved).record.bytes,
            whole.at(moved).record.bytes);
}

TEST(HfWeights, AShardTheIndexNamesMustHoldItsTensors) {
  const test::TempDir dir;
  nlohmann::json index = test::write_two_shards(kFixture, dir.path());
  const std::string name = index["weight_map"].begin().key();
  const fs::path index_file = dir.path() / kHfIndexFile;
  index["weight_map"][name] = "model-00003-of-00002.safetensors";
  test::write_hf_index(dir.path(), index);
  EXPECT_EQ(test::error_of([&] { read_hf_weights(dir.path()); }),
            fmt::format("{} places tensor {} in model-00003-of-00002.safetensors, but {} has no "
                        "such file: copy every shard the index names into the folder",
                        index_file.string(), name, dir.path().string()));
  index["weight_map"][name] = test::kSecondShard;  // the tensor is in the first
  test::write_hf_index(dir.path(), index);
  EXPECT_EQ(test::error_of([&] { read_hf_weights(dir.path()); }),
            fmt::format("{} has no tensor {}, which {} places there: the index and its shards "
                        "disagree: save the folder again",
                        (dir.path() / test::kSecondShard).string(), name, index_file.string()));
  index["weight_map"][name] = "../" + test::kFirstShard;
  test::write_hf_index(dir.path(), index);
  EXPECT_EQ(test::error_of([&] { read_hf_weights(dir.path()); }),
            fmt::format("{}: weight_map gives tensor {} the file \"../{}\": give the name of a "
                        "shard in the folder",
                        index_file.string(), name, test::kFirstShard));
  test::write_hf_index(dir.path(), {{"metadata", {{"total_size", 0}}}});
  EXPECT_EQ(
      test::error_of([&] { read_hf_weights(dir.path()); }),
      index_file.string() + ": no \"weight_map\" object: give the index save_pretrained wrote");
}

TEST(HfWeights, AFolderWithoutSafetensorsIsRefusedSayingWhy) {
  const test::TempDir dir;
  EXPECT_EQ(test::error_of([&] { read_hf_weights(dir.path()); }),
            dir.path().string() +
                " has no model.safetensors (nor model.safetensors.index.json and its shards): "
                "give a Hugging Face folder that save_pretrained wrote");
  std::ofstream(dir.path() / "pytorch_model.bin") << "PK";
  EXPECT_EQ(test::error_of([&] { read_hf_weights(dir.path()); }),
            dir.path().string() +
                " holds only pytorch_model.bin: zerolab reads safetensors: convert it with "
                "transformers (from_pretrained, then save_pretrained(DIR, "
                "safe_serialization=True))");
}

}  // namespace
}  // namespace zl
