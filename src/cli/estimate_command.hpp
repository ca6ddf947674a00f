// estimate_command.hpp — `zerolab estimate`: per-GPU model-state memory of DDP and ZeRO-1/2/3 for
// a parameter count or a model shape, as a table with the formulas or as JSON.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

#include "model/mlp.hpp"

namespace zl {

/// Flags of `zerolab estimate`, as given (checked by run_estimate).
struct EstimateFlags {
  std::string params;           ///< Ψ as an integer or a whole number like 7e9; empty if not given
  std::string model;            ///< "mlp" (or later "gpt"); empty if not given
  MlpConfig mlp;                ///< shape when model is "mlp"
  int world = 1;                ///< N
  std::string dtype = "mixed";  ///< "mixed" or "fp32"
  int optimizer_bytes = 0;      ///< K; only used when optimizer_bytes_given
  bool optimizer_bytes_given = false;
  bool json = false;  ///< print JSON instead of the table
};

/// Adds the `estimate` subcommand to `app`; `run` is set to the function that executes it.
CLI::App* add_estimate_command(CLI::App& app, std::function<int()>& run);

/// Checks the flags, computes the four stages and prints them. Returns the exit code.
int run_estimate(const EstimateFlags& flags);

}  // namespace zl
