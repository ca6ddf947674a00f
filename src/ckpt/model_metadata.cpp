// model_metadata.cpp — a model's configuration as safetensors `__metadata__`, and the check that a
// file's configuration is the run's.
#include "ckpt/model_metadata.hpp"

#include <array>
#include <utility>

#include "core/error.hpp"

namespace zl {

namespace {

// Each model field and the zerolab flag that sets it.
constexpr std::array<std::pair<std::string_view, std::string_view>, 10> kFieldFlags = {{
    {"model", "--model"},
    {"n_layer", "--n-layer"},
    {"n_head", "--n-head"},
    {"n_embd", "--n-embd"},
    {"n_positions", "--block-size"},
    {"vocab_size", "--vocab"},
    {"layers", "--layers"},
    {"width", "--width"},
    {"in", "--in"},
    {"classes", "--classes"},
}};

}  // namespace

Metadata model_metadata(const GptConfig& gpt) {
  return {{"format", "pt"},
          {"model", "gpt"},
          {"n_layer", std::to_string(gpt.n_layer)},
          {"n_head", std::to_string(gpt.n_head)},
          {"n_embd", std::to_string(gpt.n_embd)},
          {"n_positions", std::to_string(gpt.block_size)},
          {"vocab_size", std::to_string(gpt.vocab)}};
}

Metadata model_metadata(const MlpConfig& mlp) {
  return {{"format", "pt"},
          {"model", "mlp"},
          {"layers", std::to_string(mlp.layers)},
          {"width", std::to_string(mlp.width)},
          {"in", std::to_string(mlp.in)},
          {"classes", std::to_string(mlp.classes)}};
}

void check_model_metadata(const Metadata& file, const Metadata& expected, std::string_view source) {
  for (const auto& [key, flag] : kFieldFlags) {
    const auto in_file = file.find(std::string(key));
    const auto wanted = expected.find(std::string(key));
    if (in_file == file.end() || wanted == expected.end()) continue;
    ZL_CHECK(in_file->second == wanted->second,
             "{} holds a model with {} {}, this run's has {}: give {} {} or a file of this run's "
             "model",
             source, key, in_file->second, wanted->second, flag, in_file->second);
  }
}

}  // namespace zl
