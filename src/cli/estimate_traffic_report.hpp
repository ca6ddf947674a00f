// estimate_traffic_report.hpp — what `zerolab estimate` prints about communication: the bytes one
// GPU sends per optimizer step at each stage, by the links they cross (inside a node, across the
// nodes, or a ring spanning both), with each collective's term and formula
// (engines/estimate_traffic.hpp), as a table or JSON.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

#include "engines/estimate_traffic.hpp"

namespace zl {

/// The four stages' traffic for one rank, and the world they were estimated for.
struct TrafficReport {
  TrafficWorld world;                   ///< W, G and the units' forward order
  std::vector<TrafficEstimate> stages;  ///< stages 0, 1, 2 and 3
  bool visits_twice = false;            ///< a unit runs twice a forward pass (GPT-2's wte)
};

/// Stages 0-3 of `units` on `world` with `features`, for rank 0. Throws zl::Error as
/// estimate_traffic does.
TrafficReport traffic_report(const std::vector<UnitSpec>& units, const TrafficWorld& world,
                             const TrainingFeatures& features);

/// Prints the stages' bytes by level as a table, then each stage's terms with their formulas.
void print_traffic(const TrafficReport& report);

/// The report as JSON: rank, world, gpus_per_node, nodes and, per stage, its bytes by level and
/// its terms.
nlohmann::ordered_json traffic_json(const TrafficReport& report);

}  // namespace zl
