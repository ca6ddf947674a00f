// rank_model.cpp — the model of one rank, and the parameters every engine starts from.
#include "run/rank_model.hpp"

#include <utility>

#include "ckpt/hf_folder.hpp"
#include "ckpt/safetensors.hpp"
#include "core/error.hpp"
#include "model/gpt.hpp"
#include "model/mlp.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "run/train.hpp"

namespace zl {

Metadata model_metadata(const TrainConfig& config) {
  return config.model == ModelKind::Gpt ? model_metadata(config.gpt) : model_metadata(config.mlp);
}

namespace {

// The tensors of --init's file or Hugging Face folder, each with its file, after the
// configuration they hold is checked against the run's: a folder's is its config.json, a file's
// its metadata.
std::vector<HfTensor> read_init(const TrainConfig& config) {
  const std::filesystem::path& init = config.init_file;
  if (std::filesystem::is_directory(init)) {
    const std::filesystem::path hf_config = init / kHfConfigFile;
    check_model_metadata(hf_config_metadata(hf_config), model_metadata(config),
                         "--init " + hf_config.string());
    return read_hf_weights(init);
  }
  const std::filesystem::path name = init.filename();
  ZL_CHECK(name != kHfConfigFile && name != kHfIndexFile,
           "--init {} is a Hugging Face folder's {}, not its weights: give the folder (--init {})",
           init.string(), name.string(),
           init.has_parent_path() ? init.parent_path().string() : std::string("."));
  SafetensorsFile file = read_safetensors_file(init);
  check_model_metadata(file.metadata, model_metadata(config), "--init " + init.string());
  std::vector<HfTensor> tensors;
  for (auto& record : file.tensors) tensors.push_back({init, std::move(record)});
  return tensors;
}

}  // namespace

NamedTensors init_tensors(const TrainConfig& config) {
  NamedTensors tensors;
  if (config.init_file.empty()) return tensors;
  for (const auto& [file, record] : read_init(config)) {
    ZL_CHECK(record.dtype == DType::F32,
             "{}: tensor {} is {}, but --init reads fp32 weights: save them in fp32 (transformers: "
             "model.float().save_pretrained(DIR))",
             file.string(), record.name, dtype_name(record.dtype));
    tensors[record.name] = {record.shape, to_floats(record), file.string()};
  }
  return tensors;
}

std::vector<std::string> init_warnings(const TrainConfig& config) {
  if (!std::filesystem::is_directory(config.init_file)) return {};
  return hf_config_warnings(config.init_file / kHfConfigFile);
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
