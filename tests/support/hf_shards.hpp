// hf_shards.hpp — a Hugging Face folder saved again in two shards, as save_pretrained writes a
// model larger than max_shard_size: model-00001-of-00002.safetensors and
// model-00002-of-00002.safetensors, and model.safetensors.index.json whose weight_map names each
// tensor's shard (tests/ckpt, tests/cli).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "ckpt/hf_folder.hpp"
#include "ckpt/safetensors.hpp"

namespace zl::test {

/// The shard file names write_two_shards uses.
inline const std::string kFirstShard = "model-00001-of-00002.safetensors";
inline const std::string kSecondShard = "model-00002-of-00002.safetensors";

/// Writes `index` as the folder's model.safetensors.index.json.
inline void write_hf_index(const std::filesystem::path& dir, const nlohmann::json& index) {
  std::ofstream(dir / kHfIndexFile) << index.dump(2);
}

/// Writes the folder `to` (created) holding `from`'s config.json and the tensors of its
/// model.safetensors split in two shards (the first half in file order, then the rest) with
/// their index; no model.safetensors. Returns the index written.
inline nlohmann::json write_two_shards(const std::filesystem::path& from,
                                       const std::filesystem::path& to) {
  std::filesystem::create_directories(to);
  std::filesystem::copy_file(from / kHfConfigFile, to / kHfConfigFile);
  const SafetensorsFile whole = read_safetensors_file(from / kHfWeightsFile);
  const auto half = static_cast<std::ptrdiff_t>(whole.tensors.size() / 2);
  const std::vector<TensorRecord> first(whole.tensors.begin(), whole.tensors.begin() + half);
  const std::vector<TensorRecord> second(whole.tensors.begin() + half, whole.tensors.end());
  nlohmann::json index = {{"metadata", {{"total_size", 0}}},
                          {"weight_map", nlohmann::json::object()}};
  std::uint64_t total_bytes = 0;
  for (const auto& [file, tensors] :
       {std::pair{kFirstShard, first}, std::pair{kSecondShard, second}}) {
    write_safetensors(to / file, tensors, whole.metadata);
    for (const auto& tensor : tensors) {
      index["weight_map"][tensor.name] = file;
      total_bytes += tensor.bytes.size();
    }
  }
  index["metadata"]["total_size"] = total_bytes;
  write_hf_index(to, index);
  return index;
}

}  // namespace zl::test
