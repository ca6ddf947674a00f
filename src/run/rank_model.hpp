// rank_model.hpp — the model one rank trains (the MLP or the GPT of the config), starting from
// --init's tensors when the run has them.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/model_metadata.hpp"
#include "model/model.hpp"
#include "model/named_init.hpp"
#include "ops/device.hpp"
#include "run/train_config.hpp"

namespace zl {

/// The tensors of config.init_file, read once for all ranks (empty without --init): an fp32
/// safetensors file, or a Hugging Face GPT-2 folder (ckpt/hf_folder.hpp; one model.safetensors
/// or the shards its index names), each tensor with the file it came from. Throws zl::Error
/// naming the file and the field when its metadata or config.json holds another model
/// configuration, naming the file and the tensor for one that is not fp32, and saying to give the
/// folder for a folder's config.json or index.
NamedTensors init_tensors(const TrainConfig& config);

/// What --init's Hugging Face folder sets that the run ignores (hf_config_warnings: dropout), one
/// line each; empty without a folder. Throws as init_tensors does for a malformed config.json.
std::vector<std::string> init_warnings(const TrainConfig& config);

/// The `__metadata__` of a file of the run's model's parameters (ckpt/model_metadata.hpp).
Metadata model_metadata(const TrainConfig& config);

/// The model one rank trains: the MLP or the GPT of the config.
class RankModel {
 public:
  /// Builds the config's model on `device`, starting from `init` when the config names an --init
  /// file (then `init` must outlive the model). Throws zl::Error when the file's tensors do not
  /// fit the model, naming the file.
  RankModel(Device& device, const TrainConfig& config, const NamedTensors& init);
  /// The model the engine trains.
  Model& get() { return from_file_ ? static_cast<Model&>(*from_file_) : *model_; }

 private:
  std::unique_ptr<Model> model_;
  std::optional<NamedInitModel> from_file_;
};

}  // namespace zl
