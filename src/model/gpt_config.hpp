// gpt_config.hpp — the shape of a GPT-2 model (as Hugging Face's GPT2Config names it) and the
// named presets: `124M` is GPT-2 small; the tiny ones train in seconds on a CPU for tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "model/model.hpp"

namespace zl {

/// n_layer blocks of n_head heads over n_embd channels; contexts of up to block_size tokens from
/// a vocabulary of vocab tokens.
struct GptConfig {
  int n_layer = 2;               ///< transformer blocks, one unit each ("h.0", ...)
  int n_head = 2;                ///< attention heads per block; divides n_embd
  std::int64_t n_embd = 32;      ///< channels C of the residual stream
  std::int64_t block_size = 16;  ///< T: the longest context, rows of wpe.weight
  std::int64_t vocab = 64;       ///< V: tokens are in [0, vocab), wte.weight's real rows
};

/// The multiple of rows the vocabulary is padded to in wte and the LM head (llm.c's 128): a GPU's
/// matrix products run at full speed when the logits' row length is aligned.
inline constexpr std::int64_t kVocabPaddingMultiple = 128;

/// Vp, config.vocab rounded up to a multiple of kVocabPaddingMultiple (GPT-2's 50257 -> 50304):
/// the rows of wte.weight in memory and the columns of the logits. Rows [V, Vp) of wte are zero
/// and stay zero: their logits take no part in the loss, so their gradient is zero.
std::int64_t padded_vocab(const GptConfig& config);

/// Throws zl::Error with a one-line message naming the bad size (every size >= 1, n_embd a
/// multiple of n_head).
void validate(const GptConfig& config);

/// The preset called `name` ("tiny", "small", "124M", ...); throws zl::Error listing the presets
/// for an unknown name.
GptConfig gpt_preset(std::string_view name);

/// The units of GPT-2 with `config`, in forward order, with Hugging Face names and shapes:
/// unit 0 `wte.weight` [Vp,C] (Vp = padded_vocab(config), its last Vp - V rows padding:
/// ParamSpec::pad_rows; [V,C] in files) and `wpe.weight` [T,C]; unit 1+i block i
/// (`h.{i}.ln_1.weight`, ...); the last unit `ln_f.weight`, `ln_f.bias`. The LM head is tied to wte
/// (unit 0 runs again last).
std::vector<UnitSpec> gpt_units(const GptConfig& config);

/// The order gpt_units(config) run forward: 0, 1, ..., n_layer + 1, then 0 again as the tied LM
/// head. Backward runs it reversed.
std::vector<int> gpt_forward_order(const GptConfig& config);

/// The preset names, in the order `zerolab train --help` lists them.
std::vector<std::string> gpt_preset_names();

}  // namespace zl
