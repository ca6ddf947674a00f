// hf_folder.hpp — Hugging Face's GPT-2 folder, as save_pretrained writes it and from_pretrained
// reads it: config.json (a GPT2Config) beside model.safetensors, or beside the shards that
// model.safetensors.index.json names. consolidate writes one from a GPT checkpoint (`zerolab
// consolidate DIR --hf OUT_DIR`); --init reads one and checks its config.
#pragma once

#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/consolidate.hpp"
#include "ckpt/model_metadata.hpp"
#include "ckpt/safetensors.hpp"
#include "model/gpt_config.hpp"

namespace zl {

/// The parameters' file name in a Hugging Face folder.
inline constexpr std::string_view kHfWeightsFile = "model.safetensors";
/// The configuration's file name in a Hugging Face folder.
inline constexpr std::string_view kHfConfigFile = "config.json";
/// The index of a sharded folder: its "weight_map" names the shard file of every tensor.
inline constexpr std::string_view kHfIndexFile = "model.safetensors.index.json";

/// config.json of a GPT2LMHeadModel with `gpt`'s sizes and zerolab's GPT: "gelu_new" (tanh GELU),
/// LayerNorm eps 1e-5, no dropout, the head tied to wte; bos and eos the last token id.
std::string hf_gpt2_config_json(const GptConfig& gpt);

/// The model fields of the config.json at `path` under model_metadata()'s names ("model": "gpt",
/// "n_layer", "n_head", "n_embd", "n_positions", "vocab_size"), for check_model_metadata. Throws
/// zl::Error naming the file for a missing or malformed file, a model_type other than "gpt2", a
/// missing size, or a setting zerolab's GPT does not compute (activation_function,
/// layer_norm_epsilon, n_inner, scale_attn_weights, scale_attn_by_inverse_layer_idx,
/// reorder_and_upcast_attn, tie_word_embeddings false: the untied lm_head is not built).
Metadata hf_config_metadata(const std::filesystem::path& path);

/// What the config.json at `path` sets that zerolab's GPT ignores, one line each without a
/// prefix: nonzero dropout (resid_pdrop, embd_pdrop, attn_pdrop; zerolab trains without dropout).
/// Empty for the config.json consolidate --hf writes. Throws as hf_config_metadata does for a
/// missing or malformed file.
std::vector<std::string> hf_config_warnings(const std::filesystem::path& path);

/// The "weight_map" of the sharded folder index at `path` (model.safetensors.index.json): tensor
/// name -> the file name of its shard in the same folder. Throws zl::Error naming the file for
/// malformed JSON, a missing map, or a value that is not a plain file name.
std::map<std::string, std::string> hf_weight_map(const std::filesystem::path& path);

/// One tensor of a Hugging Face folder and the file it was read from.
struct HfTensor {
  std::filesystem::path file;  ///< model.safetensors or the shard the index names
  TensorRecord record;         ///< as stored (any dtype)
};

/// The tensors of the Hugging Face folder `dir`: those of model.safetensors when it is there
/// (as from_pretrained prefers it), else each tensor the index's weight_map names, from the shard
/// it names. Throws a one-line zl::Error naming the file: a shard the map names that is missing
/// or lacks the tensor, a folder holding only PyTorch's pytorch_model.bin (zerolab reads
/// safetensors), or a folder with no weights file. Reads no tensor data before every shard's
/// header has been checked.
std::vector<HfTensor> read_hf_weights(const std::filesystem::path& dir);

/// Writes the GPT checkpoint at `checkpoint` as a Hugging Face folder `dir` (created if missing;
/// its parent must exist): model.safetensors (consolidate's file) and config.json. Throws
/// zl::Error, leaving neither file, for a checkpoint of another model.
ConsolidateResult consolidate_hf(const std::filesystem::path& checkpoint,
                                 const std::filesystem::path& dir);

}  // namespace zl
