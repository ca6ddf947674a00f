// train_command.hpp — `zerolab train`: flags, progress lines, the summary and output files.
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>

#include "engines/trainer.hpp"

namespace zl {

/// Flags of `zerolab train` beyond the TrainConfig.
struct TrainOutputs {
  std::filesystem::path metrics;    ///< JSON lines, one per step
  std::filesystem::path summary;    ///< JSON: both ledgers of every rank
  std::filesystem::path save_init;  ///< fp32 safetensors of the initial parameters
  std::filesystem::path save_final; ///< fp32 safetensors of the final parameters
  std::filesystem::path save_data;  ///< safetensors x and y of every sample used
  bool quiet = false;               ///< no per-step progress lines
};

/// Adds the `train` subcommand to `app`; `run` is set to the function that executes it.
CLI::App* add_train_command(CLI::App& app, std::function<int()>& run);

/// Runs a parsed train command: checks outputs, trains, prints, writes files. Returns the exit code.
int run_train(const TrainConfig& config, const TrainOutputs& outputs);

}  // namespace zl
