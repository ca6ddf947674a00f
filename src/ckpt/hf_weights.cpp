// hf_weights.cpp — the weights of a Hugging Face folder: model.safetensors, or the shards that
// model.safetensors.index.json names, each tensor from the shard its weight_map gives; a folder
// of PyTorch pickles (pytorch_model.bin) is refused.
#include <algorithm>
#include <system_error>
#include <utility>

#include "ckpt/hf_folder.hpp"
#include "core/error.hpp"

namespace zl {

namespace fs = std::filesystem;

namespace {

// What save_pretrained writes without safe_serialization: one pickle, or pickled shards and
// their index.
constexpr std::string_view kTorchWeightsFile = "pytorch_model.bin";
constexpr std::string_view kTorchIndexFile = "pytorch_model.bin.index.json";

std::vector<HfTensor> read_single(const fs::path& file) {
  std::vector<HfTensor> tensors;
  for (auto& record : read_safetensors(file)) tensors.push_back({file, std::move(record)});
  return tensors;
}

// Every shard's header is read and every tensor the map names is found in its shard before any
// tensor's data is read.
std::vector<HfTensor> read_sharded(const fs::path& dir) {
  const fs::path index = dir / kHfIndexFile;
  const std::map<std::string, std::string> weight_map = hf_weight_map(index);
  std::map<std::string, SafetensorsIndex> shards;  // by file name
  for (const auto& [name, file] : weight_map) {
    if (!shards.contains(file)) {
      std::error_code error;
      ZL_CHECK(fs::is_regular_file(dir / file, error),
               "{} places tensor {} in {}, but {} has no such file: copy every shard the index "
               "names into the folder",
               index.string(), name, file, dir.string());
      shards.emplace(file, read_safetensors_index(dir / file));
    }
    const std::vector<TensorLocation>& held = shards.at(file).tensors;
    ZL_CHECK(std::ranges::find(held, name, &TensorLocation::name) != held.end(),
             "{} has no tensor {}, which {} places there: the index and its shards disagree: save "
             "the folder again",
             (dir / file).string(), name, index.string());
  }
  std::vector<HfTensor> tensors;
  for (const auto& [name, file] : weight_map) {
    const SafetensorsIndex& shard = shards.at(file);
    tensors.push_back({shard.path, read_tensor(shard, name)});
  }
  return tensors;
}

}  // namespace

std::vector<HfTensor> read_hf_weights(const fs::path& dir) {
  std::error_code error;
  const auto holds = [&](std::string_view name) { return fs::exists(dir / name, error); };
  if (holds(kHfWeightsFile)) return read_single(dir / kHfWeightsFile);
  if (holds(kHfIndexFile)) return read_sharded(dir);
  for (const std::string_view torch_file : {kTorchWeightsFile, kTorchIndexFile}) {
    ZL_CHECK(!holds(torch_file),
             "{} holds only {}: zerolab reads safetensors: convert it with transformers "
             "(from_pretrained, then save_pretrained(DIR, safe_serialization=True))",
             dir.string(), torch_file);
  }
  fail(
      "{} has no {} (nor {} and its shards): give a Hugging Face folder that save_pretrained "
      "wrote",
      dir.string(), kHfWeightsFile, kHfIndexFile);
}

}  // namespace zl
