// estimate_fit.hpp — `zerolab estimate`'s memory wall: with a device, host and disk budget per
// GPU, the largest model (a bare Ψ) whose states fit at each stage for each placement of the
// optimizer state and ZeRO-3's parameters (none, cpu, nvme), which place's budget stops it, and
// the table and JSON that print them (the ZeRO-Infinity paper's argument: where host memory
// stops a model, NVMe lets a larger one fit).
#pragma once

#include <array>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string_view>
#include <vector>

#include "engines/estimate.hpp"

namespace zl {

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
