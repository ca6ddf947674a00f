// consolidate_command.hpp — `zerolab consolidate DIR OUT.safetensors [--with-optimizer]`: one fp32
// safetensors file of the full model from a sharded checkpoint (ckpt/consolidate.hpp); or
// `zerolab consolidate DIR --hf OUT_DIR`: a Hugging Face GPT-2 folder (ckpt/hf_folder.hpp).
#pragma once

#include <CLI/CLI.hpp>
#include <filesystem>
#include <functional>

namespace zl {

/// Arguments of `zerolab consolidate`.
struct ConsolidateFlags {
  std::filesystem::path checkpoint;  ///< checkpoint directory (follows latest) or a step directory
  std::filesystem::path out;         ///< the safetensors file to write (or empty, with hf)
  std::filesystem::path hf;          ///< the Hugging Face folder to write (or empty, with out)
  bool with_optimizer = false;       ///< also `<name>.exp_avg` and `<name>.exp_avg_sq`
};

/// Adds the `consolidate` subcommand to `app`; `run` is set to the function that executes it.
CLI::App* add_consolidate_command(CLI::App& app, std::function<int()>& run);

/// Consolidates and prints one line saying what was written. Returns the exit code.
int run_consolidate(const ConsolidateFlags& flags);

}  // namespace zl
