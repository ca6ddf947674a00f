// train_report.hpp — what `zerolab train` reports after the run (train_report.cpp): the printed
// ledgers and timeline totals, the --summary document and the --metrics lines.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "run/train.hpp"

namespace zl {

/// Prints every rank's ledgers: model-state bytes held after the last step, temporaries' peaks,
/// the total, device and host peaks, traffic; with offload, host memory and host-device copies;
/// activations at their peak by kind.
void print_summary(const TrainConfig& config, const TrainResult& result);

/// The name of the device preset compute is scaled to, or "cpu" (measured as is).
std::string_view device_name(const TrainConfig& config);

/// Prints the simulated timeline's totals of every rank: compute, comm, exposed comm, host
/// copies and the sum of step times, with the link, host link and device behind them.
void print_timeline(const TrainConfig& config, const TrainResult& result);

/// The --summary document: both ledgers of every rank (docs/usage.md lists the keys) and the
/// simulated timeline's totals per rank and overall (the largest over the ranks).
nlohmann::json summary_json(const TrainConfig& config, const TrainResult& result);

/// The --metrics lines, one JSON object per step; throughput is the step's tokens (GPT) or
/// samples (MLP) over its wall time.
std::string metrics_lines(const TrainConfig& config, const TrainResult& result);

}  // namespace zl
