// estimate_offload.cpp — estimate_offload.hpp's tables: where offloaded states rest, and the memory
// wall (each placement's largest fitting Ψ by engines/estimate.hpp's bisection, the budget one
// more parameter would exceed).
#include "cli/estimate_offload.hpp"

#include <fmt/format.h>

#include <string>

namespace zl {

namespace {

// Which budget the states of `params` parameters exceed, first the device's; "count" when none
// does (the search stopped where bytes stop being countable in int64).
std::string_view exceeded(int world, const EstimateOptions& options, int stage,
                          const PlaceBudget& budget, std::int64_t params) {
  const LedgerEstimate ledger = estimate_ledger(state_elems(params, world), options, stage);
  if (ledger.total_bytes() > budget.device_bytes) return "device";
  if (ledger.host_bytes() > budget.host_bytes) return "host";
  if (ledger.disk_bytes() > budget.disk_bytes) return "disk";
  return "count";
}

std::string placement_name(const FitRow& row) {
  if (row.optimizer == OffloadTier::None && row.param == OffloadTier::None) return "on the device";
  std::string name = fmt::format("optimizer on {}", offload_tier_name(row.optimizer));
  if (row.param != OffloadTier::None)
    name += fmt::format(", params on {}", offload_tier_name(row.param));
  return name;
}

// Billions of parameters, two decimals (the exact count is in the JSON).
std::string billions(std::int64_t params) {
  return fmt::format("{:.2f}B", static_cast<double>(params) / 1e9);
}

constexpr std::int64_t kBytesPerGb = 1'000'000'000;

}  // namespace

std::string stage_name(int stage) {
  return stage == 0 ? "0 (DDP)" : std::to_string(stage);
}

std::string gb(std::int64_t bytes) {
  std::string text = fmt::format("{}.{:09}", bytes / kBytesPerGb, bytes % kBytesPerGb);
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  return text;
}

bool offloaded(const EstimateOptions& options) {
  return options.optimizer_tier != OffloadTier::None || options.param_tier != OffloadTier::None;
}

void print_placements(const std::vector<LedgerEstimate>& stages, const EstimateOptions& options) {
  fmt::print(
      "\nwhere the model states rest per GPU with --offload-optimizer {} and --offload-param {} "
      "(the table above is the device's): offloaded, the optimizer keeps an fp32 master (4 B per "
      "parameter) whatever the precision{}; not counted: a unit's gradient on its way to a host "
      "update, and an NVMe unit's state in host memory during its update{}\n\n",
      offload_tier_name(options.optimizer_tier), offload_tier_name(options.param_tier),
      options.param_tier != OffloadTier::None
          ? "; ZeRO-3 alone offloads parameters, its persistent units staying on the device"
          : "",
      options.param_tier == OffloadTier::Nvme
          ? fmt::format("; the parameters on disk pass through {} swap buffers of b elements in "
                        "host memory (b: the largest shard on disk, at most --param-buffer-size "
                        "{}; a bare count's shard is as many units as it takes), and Ψc, the "
                        "first shards that fit in --param-max-in-cpu {} elements, stay there",
                        options.param_buffer_count, options.param_buffer_elems,
                        options.param_max_in_cpu_elems)
          : "");
  fmt::print("{:<8} {:>12} {:>12} {:>12}  {}\n", "stage", "device_GB", "host_GB", "disk_GB",
             "device | host | disk");
  for (const LedgerEstimate& stage : stages) {
    fmt::print("{:<8} {:>12} {:>12} {:>12}  {} | {} | {}\n", stage_name(stage.stage),
               gb(stage.total_bytes()), gb(stage.host_bytes()), gb(stage.disk_bytes()),
               stage.total_formula, stage.host_formula.empty() ? "-" : stage.host_formula,
               stage.disk_formula.empty() ? "-" : stage.disk_formula);
  }
}

std::vector<FitRow> fit_rows(int world, EstimateOptions options, const PlaceBudget& budget) {
  const std::pair<OffloadTier, OffloadTier> placements[] = {
      {OffloadTier::None, OffloadTier::None}, {OffloadTier::Cpu, OffloadTier::None},
      {OffloadTier::Nvme, OffloadTier::None}, {OffloadTier::Cpu, OffloadTier::Cpu},
      {OffloadTier::Nvme, OffloadTier::Cpu},  {OffloadTier::Nvme, OffloadTier::Nvme}};
  std::vector<FitRow> rows;
  for (const auto& [optimizer, param] : placements) {
    options.optimizer_tier = optimizer;
    options.param_tier = param;
    FitRow row{.optimizer = optimizer, .param = param};
    for (int stage = 0; stage < kEstimateStages; ++stage) {
      const auto s = static_cast<std::size_t>(stage);
      row.largest_params[s] = largest_fitting_params(world, options, stage, budget);
      row.bound_by[s] = exceeded(world, options, stage, budget, row.largest_params[s] + 1);
    }
    rows.push_back(row);
  }
  return rows;
}

void print_fit(int world, const PlaceBudget& budget, const std::vector<FitRow>& rows) {
  fmt::print(
      "\nthe largest model (a bare Ψ with these options) whose states fit {} GB of device, {} GB "
      "of host memory and {} GB of disk per GPU on N = {} GPUs; activations and working buffers "
      "not counted; (device), (host) or (disk): the budget one more parameter would exceed\n\n",
      static_cast<double>(budget.device_bytes) / 1e9, static_cast<double>(budget.host_bytes) / 1e9,
      static_cast<double>(budget.disk_bytes) / 1e9, world);
  fmt::print("{:<34} {:>18} {:>18} {:>18} {:>18}\n", "placement", "0 (DDP)", "1", "2", "3");
  for (const FitRow& row : rows) {
    std::string cells;
    for (std::size_t s = 0; s < row.largest_params.size(); ++s) {
      cells += fmt::format(
          " {:>18}", fmt::format("{} ({})", billions(row.largest_params[s]), row.bound_by[s]));
    }
    fmt::print("{:<34}{}\n", placement_name(row), cells);
  }
  // ZeRO-3's column in words, from the numbers: each placement beside the one before it.
  constexpr std::size_t kZero3 = 3;
  const FitRow& device = rows.front();
  fmt::print("\nAt ZeRO-3 the device alone fits {} ({} bound)",
             billions(device.largest_params[kZero3]), device.bound_by[kZero3]);
  for (std::size_t r = 1; r < rows.size(); ++r) {
    const double ratio = device.largest_params[kZero3] == 0
                             ? 0.0
                             : static_cast<double>(rows[r].largest_params[kZero3]) /
                                   static_cast<double>(device.largest_params[kZero3]);
    fmt::print("; {}, {} ({:.1f}x, {} bound)", placement_name(rows[r]),
               billions(rows[r].largest_params[kZero3]), ratio, rows[r].bound_by[kZero3]);
  }
  fmt::print(".\n");
}

nlohmann::ordered_json fit_json(const PlaceBudget& budget, const std::vector<FitRow>& rows) {
  nlohmann::ordered_json out = {{"device_bytes", budget.device_bytes},
                                {"host_bytes", budget.host_bytes},
                                {"disk_bytes", budget.disk_bytes},
                                {"placements", nlohmann::ordered_json::array()}};
  for (const FitRow& row : rows) {
    nlohmann::ordered_json bound_by = nlohmann::ordered_json::array();
    for (const std::string_view place : row.bound_by) bound_by.push_back(std::string(place));
    out["placements"].push_back({{"offload_optimizer", offload_tier_name(row.optimizer)},
                                 {"offload_param", offload_tier_name(row.param)},
                                 {"largest_params", row.largest_params},
                                 {"bound_by", bound_by}});
  }
  return out;
}

}  // namespace zl
