// rank_model.cpp — the model of one rank, and the parameters every engine starts from.
#include "run/rank_model.hpp"

#include "ckpt/hf_folder.hpp"
#include "ckpt/safetensors.hpp"
#include "model/gpt.hpp"
#include "model/mlp.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "run/train.hpp"

namespace zl {

Metadata model_metadata(const TrainConfig& config) {
  return config.model == ModelKind::Gpt ? model_metadata(config.gpt) : model_metadata(config.mlp);
}

NamedTensors init_tensors(const TrainConfig& config) {
  NamedTensors tensors;
  if (config.init_file.empty()) return tensors;
  // A Hugging Face folder's configuration is its config.json; a file's is its metadata.
  const bool folder = std::filesystem::is_directory(config.init_file);
  const SafetensorsFile file =
      read_safetensors_file(folder ? config.init_file / kHfWeightsFile : config.init_file);
  const std::filesystem::path hf_config = config.init_file / kHfConfigFile;
  check_model_metadata(folder ? hf_config_metadata(hf_config) : file.metadata,
                       model_metadata(config),
                       "--init " + (folder ? hf_config : config.init_file).string());
  for (const auto& record : file.tensors) {
    tensors[record.name] = {record.shape, to_floats(record)};
  }
  return tensors;
}

RankModel::RankModel(Device& device, const TrainConfig& config, const NamedTensors& init) {
  if (config.model == ModelKind::Gpt) {
    model_ =
        std::make_unique<Gpt>(device, config.gpt, config.activations, config.features.precision);
  } else {
    model_ = std::make_unique<Mlp>(device, config.mlp);
  }
  if (!config.init_file.empty()) from_file_.emplace(*model_, init, config.init_file.string());
}

std::vector<std::vector<float>> initial_params(const TrainConfig& config) {
  CpuDevice device;
  const NamedTensors init = init_tensors(config);
  RankModel rank_model(device, config, init);
  const Model& model = rank_model.get();
  std::vector<std::vector<float>> params;
  for (std::size_t u = 0; u < model.units().size(); ++u) {
    params.emplace_back(static_cast<std::size_t>(model.units()[u].numel()));
    model.init_unit(static_cast<int>(u), params.back(), config.seed);
  }
  return params;
}

}  // namespace zl
