// gpt_config.cpp — GPT-2 shapes: the presets, their checks, and the Hugging Face parameter names
// and shapes of every unit.
#include "model/gpt_config.hpp"

#include <fmt/format.h>

#include <array>

#include "core/error.hpp"

namespace zl {

namespace {

struct Preset {
  std::string_view name;
  GptConfig config;
};

// tiny and small train in seconds on one CPU core (tests, lessons, the demo); 124M and 350M are
// Hugging Face's "gpt2" and "gpt2-medium".
constexpr std::array<Preset, 4> kPresets = {{
    {"tiny", {.n_layer = 2, .n_head = 2, .n_embd = 32, .block_size = 16, .vocab = 64}},
    {"small", {.n_layer = 4, .n_head = 4, .n_embd = 64, .block_size = 32, .vocab = 128}},
    {"124M", {.n_layer = 12, .n_head = 12, .n_embd = 768, .block_size = 1024, .vocab = 50257}},
    {"350M", {.n_layer = 24, .n_head = 16, .n_embd = 1024, .block_size = 1024, .vocab = 50257}},
}};

}  // namespace

void validate(const GptConfig& config) {
  ZL_CHECK(config.n_layer >= 1, "--n-layer {} is invalid: the GPT needs at least 1 layer",
           config.n_layer);
  ZL_CHECK(config.n_head >= 1, "--n-head {} is invalid: the GPT needs at least 1 head",
           config.n_head);
  ZL_CHECK(config.n_embd >= 1, "--n-embd {} is invalid: use a width >= 1", config.n_embd);
  ZL_CHECK(config.n_embd % config.n_head == 0,
           "--n-embd {} is invalid: it must be a multiple of --n-head {}", config.n_embd,
           config.n_head);
  ZL_CHECK(config.block_size >= 1, "--block-size {} is invalid: use a context of >= 1 token",
           config.block_size);
  ZL_CHECK(config.vocab >= 1, "--vocab {} is invalid: use a vocabulary of >= 1 token",
           config.vocab);
}

GptConfig gpt_preset(std::string_view name) {
  for (const auto& preset : kPresets) {
    if (preset.name == name) return preset.config;
  }
  fail("GPT preset \"{}\" does not exist: use one of {}", name,
       fmt::join(gpt_preset_names(), ", "));
}

std::vector<std::string> gpt_preset_names() {
  std::vector<std::string> names;
  for (const auto& preset : kPresets) names.emplace_back(preset.name);
  return names;
}

std::int64_t padded_vocab(const GptConfig& config) {
  const std::int64_t multiples =
      (config.vocab + kVocabPaddingMultiple - 1) / kVocabPaddingMultiple;
  return multiples * kVocabPaddingMultiple;
}

std::vector<int> gpt_forward_order(const GptConfig& config) {
  std::vector<int> order;
  for (int u = 0; u <= config.n_layer + 1; ++u) order.push_back(u);
  order.push_back(0);
  return order;
}

std::vector<UnitSpec> gpt_units(const GptConfig& config) {
  validate(config);
  const std::int64_t C = config.n_embd, Vp = padded_vocab(config);
  std::vector<UnitSpec> units;
  units.push_back({"embeddings",
                   {{"wte.weight", {Vp, C}, Vp - config.vocab},
                    {"wpe.weight", {config.block_size, C}}}});
  for (int i = 0; i < config.n_layer; ++i) {
    const std::string h = fmt::format("h.{}", i);
    units.push_back({h,
                     {{h + ".ln_1.weight", {C}},
                      {h + ".ln_1.bias", {C}},
                      {h + ".attn.c_attn.weight", {C, 3 * C}},
                      {h + ".attn.c_attn.bias", {3 * C}},
                      {h + ".attn.c_proj.weight", {C, C}},
                      {h + ".attn.c_proj.bias", {C}},
                      {h + ".ln_2.weight", {C}},
                      {h + ".ln_2.bias", {C}},
                      {h + ".mlp.c_fc.weight", {C, 4 * C}},
                      {h + ".mlp.c_fc.bias", {4 * C}},
                      {h + ".mlp.c_proj.weight", {4 * C, C}},
                      {h + ".mlp.c_proj.bias", {C}}}});
  }
  units.push_back({"ln_f", {{"ln_f.weight", {C}}, {"ln_f.bias", {C}}}});
  return units;
}

}  // namespace zl
