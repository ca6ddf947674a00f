// estimate_traffic_report.cpp — the traffic table and JSON of `zerolab estimate`.
#include "cli/estimate_traffic_report.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "cli/estimate_offload.hpp"

namespace zl {

namespace {

int gpus_of(const TrafficWorld& world) {
  return world.gpus_per_node > 0 ? world.gpus_per_node : world.world;
}

bool uses_symbol(const TrafficReport& report, std::string_view symbol) {
  return std::ranges::any_of(report.stages, [&](const TrafficEstimate& stage) {
    return std::ranges::any_of(stage.terms, [&](const TrafficTerm& term) {
      return term.formula.find(symbol) != std::string::npos;
    });
  });
}

}  // namespace

TrafficReport traffic_report(const std::vector<UnitSpec>& units, const TrafficWorld& world,
                             const TrainingFeatures& features) {
  TrafficReport report;
  report.world = world;
  for (int stage = 0; stage < kEstimateStages; ++stage) {
    report.stages.push_back(estimate_traffic(units, world, features, stage));
  }
  std::vector<int> order = world.forward_order;
  std::ranges::sort(order);
  report.visits_twice = std::ranges::adjacent_find(order) != order.end();
  return report;
}

void print_traffic(const TrafficReport& report) {
  const int w = report.world.world;
  const int g = gpus_of(report.world);
  fmt::print(
      "\ntraffic per GPU per optimizer step, bytes rank 0 sends, by the links they cross: N = {} "
      "GPUs{}\n",
      w,
      g < w ? fmt::format(" in M = {} nodes of G = {} (inside: a node's links, NVLink; across: "
                          "the NICs; spanning: a ring through both)",
                          w / g, g)
            : " on one node (--gpus-per-node G splits them)");
  fmt::print("{:<8} {:>15} {:>15} {:>15} {:>15} {:>11}  {}\n", "stage", "inside_bytes",
             "across_bytes", "spanning_bytes", "total_bytes", "total_GB", "engine");
  for (const TrafficEstimate& stage : report.stages) {
    fmt::print("{:<8} {:>15} {:>15} {:>15} {:>15} {:>11}  {}\n", stage_name(stage.stage),
               stage.sent_bytes(LinkLevel::Inside), stage.sent_bytes(LinkLevel::Across),
               stage.sent_bytes(LinkLevel::Spanning), stage.sent_bytes(), gb(stage.sent_bytes()),
               stage.engine);
  }
  fmt::print(
      "\nΨp: the padded elements of the group that shards (Ψp of the table above, or of a "
      "node's G with --shard-group node){}{}\n",
      uses_symbol(report, "Ψf")
          ? report.visits_twice
                ? "; Ψf: the padded elements one forward pass gathers (a unit run twice, as "
                  "GPT-2's wte for the tied LM head, counts twice)"
                : "; Ψf: the padded elements one forward pass gathers (Ψp, but for the units "
                  "ZeRO-3 keeps whole)"
          : "",
      uses_symbol(report, "q8(") || uses_symbol(report, "q4(")
          ? "; q8(n), q4(n): n values as int8 or int4 codes with an fp32 "
            "scale for each block of 256"
          : "");
  for (const TrafficEstimate& stage : report.stages) {
    fmt::print("stage {}, {}:\n", stage_name(stage.stage), stage.engine);
    for (const TrafficTerm& term : stage.terms) {
      fmt::print("  {:<15} {:<9} {:>4} ranks  {:>15} bytes  {:<32} {}\n",
                 collective_name(term.kind), link_level_name(term.level), term.group_ranks,
                 term.sent_bytes, term.what, term.formula);
    }
  }
}

nlohmann::ordered_json traffic_json(const TrafficReport& report) {
  const int g = gpus_of(report.world);
  nlohmann::ordered_json out = {{"rank", 0},
                                {"world", report.world.world},
                                {"gpus_per_node", g},
                                {"nodes", report.world.world / g},
                                {"stages", nlohmann::ordered_json::array()}};
  for (const TrafficEstimate& stage : report.stages) {
    nlohmann::ordered_json terms = nlohmann::ordered_json::array();
    for (const TrafficTerm& term : stage.terms) {
      terms.push_back({{"what", term.what},
                       {"collective", collective_name(term.kind)},
                       {"level", link_level_name(term.level)},
                       {"group_ranks", term.group_ranks},
                       {"bytes", term.sent_bytes},
                       {"formula", term.formula}});
    }
    out["stages"].push_back({{"stage", stage.stage},
                             {"engine", stage.engine},
                             {"inside_bytes", stage.sent_bytes(LinkLevel::Inside)},
                             {"across_bytes", stage.sent_bytes(LinkLevel::Across)},
                             {"spanning_bytes", stage.sent_bytes(LinkLevel::Spanning)},
                             {"total_bytes", stage.sent_bytes()},
                             {"terms", terms}});
  }
  return out;
}

}  // namespace zl
