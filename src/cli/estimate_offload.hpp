// estimate_offload.hpp — what `zerolab estimate` prints about offload, and the text both its
// tables use. Where the model states rest with --offload-optimizer and --offload-param (device,
// host memory, disk, per GPU) and the memory wall: with a device, host and disk budget per GPU,
// the largest model (a bare Ψ) whose states fit at each stage for each placement of the optimizer
// state and ZeRO-3's parameters (none, cpu, nvme), which place's budget stops it, and the table
// and JSON that print them (the ZeRO-Infinity paper's argument: where host memory stops a model,
// NVMe lets a larger one fit).
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "engines/estimate.hpp"

namespace zl {

/// "0 (DDP)", "1", "2" or "3": a stage as the tables name it.
std::string stage_name(int stage);

/// Exact decimal GB (1e9 bytes) of integer bytes, without trailing zeros: 112, 38.5, 0.000092288.
std::string gb(std::int64_t bytes);

/// Whether `options` places anything off the device.
bool offloaded(const EstimateOptions& options);

/// Where each stage's model states rest per GPU with `options`' offload: device, host and disk
/// bytes, each place's formula (the device's table is printed before it).
void print_placements(const std::vector<LedgerEstimate>& stages, const EstimateOptions& options);

/// One placement's largest fitting Ψ at stages 0-3, and which budget stops each.
struct FitRow {
  OffloadTier optimizer = OffloadTier::None;  ///< where the master and optimizer state rest
  OffloadTier param = OffloadTier::None;      ///< where ZeRO-3's parameter shards rest
  std::array<std::int64_t, kEstimateStages> largest_params{};  ///< 0: not one parameter fits
  /// "device", "host" or "disk": the budget one more parameter would exceed, per stage ("count"
  /// where the search stopped first, at the most parameters whose bytes int64 counts).
  std::array<std::string_view, kEstimateStages> bound_by{};
};

/// The rows of the placements none, optimizer cpu, optimizer nvme, and both with ZeRO-3's
/// parameters in host memory, for `options`' precision, accumulation and optimizer bytes.
std::vector<FitRow> fit_rows(int world, EstimateOptions options, const PlaceBudget& budget);

/// Prints the rows as a table, billions of parameters, with a sentence on ZeRO-3's column.
void print_fit(int world, const PlaceBudget& budget, const std::vector<FitRow>& rows);

/// The rows as JSON: the budgets in bytes and, per placement, each stage's largest Ψ and bound.
nlohmann::ordered_json fit_json(const PlaceBudget& budget, const std::vector<FitRow>& rows);

}  // namespace zl
