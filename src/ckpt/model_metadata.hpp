// model_metadata.hpp — the `__metadata__` zerolab writes beside a model's parameters (--save-init,
// --save-final, consolidate): {"format": "pt"}, which transformers' from_pretrained requires of a
// safetensors file, and the model's configuration, which --init checks, since shapes alone do not
// tell, for example, a GPT's head count.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "model/gpt_config.hpp"
#include "model/mlp.hpp"

namespace zl {

/// A safetensors file's `__metadata__`: string keys to string values.
using Metadata = std::map<std::string, std::string>;

/// {"format": "pt", "model": "gpt"} and the GPT's sizes under Hugging Face's config.json names:
/// "n_layer", "n_head", "n_embd", "n_positions" (block_size) and "vocab_size".
Metadata model_metadata(const GptConfig& gpt);

/// {"format": "pt", "model": "mlp"} and the MLP's "layers", "width", "in" and "classes".
Metadata model_metadata(const MlpConfig& mlp);

/// Throws zl::Error naming `source` (e.g. "--init FILE"), the first model field whose value in
/// `file` differs from `expected` (a model_metadata()) and the flag that sets it. A field the
/// file lacks is not checked: files from other tools (Hugging Face's) carry only "format".
void check_model_metadata(const Metadata& file, const Metadata& expected, std::string_view source);

}  // namespace zl
