// train_command.hpp — `zerolab train`: flags, progress lines, the summary and output files.
#pragma once

#include <CLI/CLI.hpp>

#include <filesystem>
#include <functional>
#include <string>
#include <vector>

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

/// A parsed `zerolab train` command line.
struct TrainArgs {
  TrainConfig config;
  TrainOutputs outputs;
  CheckpointPlan checkpoints;
  std::string model = "mlp";    ///< --model (mlp is the only choice today)
  std::string backend = "sim";  ///< --backend (sim is the only choice today)
};

/// Adds the flags of `zerolab train` to `cmd`; parsing writes them into `args`, which must outlive
/// `cmd`. A flag's own check (--stage 4, a bad --inject-fault) throws zl::Error during parsing.
void add_train_flags(CLI::App& cmd, TrainArgs& args);

/// Adds the `train` subcommand to `app`; `run` is set to the function that executes it.
CLI::App* add_train_command(CLI::App& app, std::function<int()>& run);

/// Parses the arguments after `zerolab train` without running anything (the fuzzer's entry).
/// Throws CLI::ParseError (CLI::CallForHelp for --help) or zl::Error, as `zerolab train` reports
/// them; validate(config) is left to the caller, as run_train() does it.
TrainArgs parse_train_args(const std::vector<std::string>& args);

/// Runs a parsed train command: checks outputs, trains, prints, writes files. Returns the exit code.
int run_train(const TrainConfig& config, const TrainOutputs& outputs,
              const CheckpointPlan& checkpoints = {});

}  // namespace zl
