// hf_folder.cpp — Hugging Face's GPT-2 folder: config.json written from a GptConfig and read back
// as model fields, the sharded folder's index, and consolidate into model.safetensors beside
// config.json. The weights are read in hf_weights.cpp.
#include "ckpt/hf_folder.hpp"

#include <fmt/format.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <system_error>
#include <utility>

#include "ckpt/safetensors.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace zl {

namespace fs = std::filesystem;

namespace {

constexpr double kLayerNormEps = 1e-5;                // zerolab's GPT LayerNorm
constexpr std::string_view kActivation = "gelu_new";  // the tanh GELU

// config.json's whole-number `key`; throws naming the file when it is missing or not one.
std::int64_t size_field(const nlohmann::json& config, const char* key, const fs::path& path) {
  const auto found = config.find(key);
  ZL_CHECK(found != config.end() && found->is_number_integer(),
           "{}: \"{}\" is missing or not a whole number: a GPT-2 config.json needs it",
           path.string(), key);
  return found->get<std::int64_t>();
}

nlohmann::json read_json(const fs::path& path) {
  std::error_code error;
  ZL_CHECK(fs::is_regular_file(path, error),
           "{}: no such file: a Hugging Face folder holds config.json and model.safetensors",
           path.string());
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json json = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  ZL_CHECK(json.is_object(), "{}: not a JSON object: give the {} save_pretrained wrote",
           path.string(), path.filename().string());
  return json;
}

// A file name without a folder: what save_pretrained writes into a weight_map.
bool plain_file_name(const std::string& name) {
  const fs::path path(name);
  return !name.empty() && name != "." && name != ".." && path.filename() == path;
}

}  // namespace

std::string hf_gpt2_config_json(const GptConfig& gpt) {
  const nlohmann::json config = {{"architectures", {"GPT2LMHeadModel"}},
                                 {"model_type", "gpt2"},
                                 {"n_layer", gpt.n_layer},
                                 {"n_head", gpt.n_head},
                                 {"n_embd", gpt.n_embd},
                                 {"n_positions", gpt.block_size},
                                 {"n_ctx", gpt.block_size},
                                 {"vocab_size", gpt.vocab},
                                 {"activation_function", kActivation},
                                 {"layer_norm_epsilon", kLayerNormEps},
                                 {"resid_pdrop", 0.0},
                                 {"embd_pdrop", 0.0},
                                 {"attn_pdrop", 0.0},
                                 {"initializer_range", 0.02},
                                 {"bos_token_id", gpt.vocab - 1},
                                 {"eos_token_id", gpt.vocab - 1},
                                 {"tie_word_embeddings", true},
                                 {"torch_dtype", "float32"}};
  return config.dump(2) + "\n";
}

Metadata hf_config_metadata(const fs::path& path) {
  const nlohmann::json config = read_json(path);
  const auto type = config.find("model_type");
  ZL_CHECK(type != config.end() && *type == "gpt2",
           "{}: model_type is {}, but zerolab's GPT is GPT-2: give a \"gpt2\" model's folder",
           path.string(), type == config.end() ? "missing" : type->dump());
  if (const auto act = config.find("activation_function"); act != config.end()) {
    ZL_CHECK(*act == kActivation, "{}: activation_function {}, but zerolab's GPT uses \"{}\"",
             path.string(), act->dump(), kActivation);
  }
  // GPT-2 variants zerolab's attention and MLP do not compute.
  for (const auto& [key, wanted] :
       {std::pair{"scale_attn_weights", true}, std::pair{"scale_attn_by_inverse_layer_idx", false},
        std::pair{"reorder_and_upcast_attn", false}}) {
    const auto found = config.find(key);
    ZL_CHECK(found == config.end() || *found == wanted, "{}: {} {}, but zerolab's GPT has {}",
             path.string(), key, found == config.end() ? "" : found->dump(), wanted);
  }
  if (const auto inner = config.find("n_inner"); inner != config.end() && !inner->is_null()) {
    ZL_CHECK(*inner == 4 * size_field(config, "n_embd", path),
             "{}: n_inner {}, but zerolab's GPT's MLP is 4 * n_embd wide", path.string(),
             inner->dump());
  }
  if (const auto eps = config.find("layer_norm_epsilon"); eps != config.end()) {
    ZL_CHECK(eps->is_number() && std::abs(eps->get<double>() - kLayerNormEps) < 1e-12,
             "{}: layer_norm_epsilon {}, but zerolab's GPT uses {}", path.string(), eps->dump(),
             kLayerNormEps);
  }
  // transformers ties the head unless the config says otherwise.
  if (const auto tie = config.find("tie_word_embeddings"); tie != config.end()) {
    ZL_CHECK(*tie == true,
             "{}: tie_word_embeddings {}, but zerolab's GPT ties the head to wte (an untied "
             "lm_head is not built): give a GPT-2 whose head is tied",
             path.string(), tie->dump());
  }
  return {{"model", "gpt"},
          {"n_layer", std::to_string(size_field(config, "n_layer", path))},
          {"n_head", std::to_string(size_field(config, "n_head", path))},
          {"n_embd", std::to_string(size_field(config, "n_embd", path))},
          {"n_positions", std::to_string(size_field(config, "n_positions", path))},
          {"vocab_size", std::to_string(size_field(config, "vocab_size", path))}};
}

std::vector<std::string> hf_config_warnings(const fs::path& path) {
  const nlohmann::json config = read_json(path);
  std::vector<std::string> dropouts;
  for (const char* key : {"resid_pdrop", "embd_pdrop", "attn_pdrop"}) {
    const auto found = config.find(key);
    if (found == config.end() || (found->is_number() && found->get<double>() == 0.0)) continue;
    dropouts.push_back(fmt::format("{} {}", key, found->dump()));
  }
  if (dropouts.empty()) return {};
  return {fmt::format("{}: zerolab trains without dropout: {} ignored", path.string(),
                      fmt::join(dropouts, ", "))};
}

std::map<std::string, std::string> hf_weight_map(const fs::path& path) {
  const nlohmann::json index = read_json(path);
  const auto map = index.find("weight_map");
  ZL_CHECK(map != index.end() && map->is_object(),
           "{}: no \"weight_map\" object: give the index save_pretrained wrote", path.string());
  std::map<std::string, std::string> files;
  for (const auto& [name, file] : map->items()) {
    ZL_CHECK(file.is_string() && plain_file_name(file.get<std::string>()),
             "{}: weight_map gives tensor {} the file {}: give the name of a shard in the folder",
             path.string(), name, file.dump());
    files.emplace(name, file.get<std::string>());
  }
  return files;
}

ConsolidateResult consolidate_hf(const fs::path& checkpoint, const fs::path& dir) {
  std::error_code error;
  fs::create_directory(dir, error);
  ZL_CHECK(fs::is_directory(dir, error),
           "--hf {}: cannot create the folder: its parent must exist and not be a file",
           dir.string());
  const fs::path weights = dir / kHfWeightsFile;
  const ConsolidateResult result = consolidate(checkpoint, weights, /*with_optimizer=*/false);
  const Metadata metadata = read_safetensors_index(weights).metadata;
  if (metadata.at("model") != "gpt") {
    fs::remove(weights, error);
    fail("--hf writes a Hugging Face GPT-2 folder, but {} holds an {}: consolidate it to a file",
         checkpoint.string(), metadata.at("model"));
  }
  const GptConfig gpt{.n_layer = std::stoi(metadata.at("n_layer")),
                      .n_head = std::stoi(metadata.at("n_head")),
                      .n_embd = std::stoll(metadata.at("n_embd")),
                      .block_size = std::stoll(metadata.at("n_positions")),
                      .vocab = std::stoll(metadata.at("vocab_size"))};
  write_file_atomically(dir / kHfConfigFile, hf_gpt2_config_json(gpt));
  return result;
}

}  // namespace zl
