// what_if.cpp — predicts a training run on another world size from a measured one: the recorded
// timeline programs re-costed and replayed for N ranks, memory from the estimator.
#include "cli/what_if.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "core/error.hpp"
#include "engines/estimate.hpp"
#include "engines/partition.hpp"

namespace zl {

namespace {

// The whole ring buffer of a call on `to_world` ranks (see what_if.hpp): a reduce_scatter or
// all_gather of whole padded units (a multiple of from_world * kNormBlockElems) is padded for
// to_world instead; anything else keeps its size.
std::int64_t buffer_for_world(CollectiveKind kind, std::int64_t buffer_elems, int from_world,
                              int to_world) {
  const bool sharded = kind == CollectiveKind::ReduceScatter || kind == CollectiveKind::AllGather;
  if (!sharded || buffer_elems % (from_world * kNormBlockElems) != 0) return buffer_elems;
  return padded_elems(buffer_elems, to_world);
}

// Bytes rank 0 sends in the steps of `program`, per step.
std::int64_t sent_bytes_per_step(const std::vector<TimelineOp>& program, std::int64_t steps) {
  std::int64_t sent_bytes = 0;
  bool in_step = false;
  for (const auto& op : program) {
    if (op.kind == TimelineOp::Kind::BeginStep) in_step = true;
    if (op.kind == TimelineOp::Kind::EndStep) in_step = false;
    if (op.kind == TimelineOp::Kind::Issue && in_step) sent_bytes += op.call.sent_bytes;
  }
  return steps > 0 ? sent_bytes / steps : 0;
}

// Per-step means of every rank's steps, the largest over the ranks.
void fill_times(WorldFigures& figures, const std::vector<TimelineRecord>& ranks) {
  for (const auto& rank : ranks) {
    if (rank.steps.empty()) continue;
    const StepTimes sum = rank.totals();
    const auto steps = static_cast<double>(rank.steps.size());
    figures.step_ms = std::max(figures.step_ms, sum.step_ms / steps);
    figures.compute_ms = std::max(figures.compute_ms, sum.compute_ms / steps);
    figures.comm_ms = std::max(figures.comm_ms, sum.comm_ms / steps);
    figures.exposed_comm_ms = std::max(figures.exposed_comm_ms, sum.exposed_comm_ms / steps);
    figures.copy_ms = std::max(figures.copy_ms, sum.copy_ms / steps);
  }
}

nlohmann::json figures_json(const WorldFigures& figures) {
  return {{"world", figures.world},
          {"step_ms", figures.step_ms},
          {"compute_ms", figures.compute_ms},
          {"comm_ms", figures.comm_ms},
          {"exposed_comm_ms", figures.exposed_comm_ms},
          {"copy_ms", figures.copy_ms},
          {"sent_bytes", figures.sent_bytes},
          {"model_state_bytes", figures.model_state_bytes},
          {"peak_bytes", figures.peak_bytes}};
}

}  // namespace

std::vector<TimelineOp> program_for_world(const std::vector<TimelineOp>& program, int rank,
                                          const WorldScaling& scaling) {
  const auto& [from_world, to_world, gpus_per_node, layout_from, layout_to, sharded_update,
               replicas] = scaling;
  ZL_CHECK(from_world >= 1 && to_world >= 1 && layout_from >= 1 && layout_to >= 1,
           "what-if from world {} to world {}: use 1 or more", from_world, to_world);
  const int from_nodes = node_count(from_world, gpus_per_node);
  const int to_nodes = node_count(to_world, gpus_per_node);
  std::vector<TimelineOp> out = program;
  for (auto& op : out) {
    if (op.kind == TimelineOp::Kind::Compute && sharded_update && op.label == "update") {
      op.compute_ms = op.compute_ms * layout_from / layout_to;
    }
    if (op.kind == TimelineOp::Kind::Copy && sharded_update) {
      op.copy_bytes = op.copy_bytes * layout_from / layout_to;
    }
    if (op.kind != TimelineOp::Kind::Issue) continue;
    CallInfo& call = op.call;
    if (replicas && call.group_ranks == from_nodes && call.group_nodes == from_nodes) {
      call.group_ranks = to_nodes;  // one rank on every node, of the predicted world's nodes
      call.group_nodes = to_nodes;
    }
    const int ranks = call.group_ranks == 0 ? to_world : call.group_ranks;
    call.buffer_elems = buffer_for_world(call.kind, call.buffer_elems, layout_from, layout_to);
    call.sent_bytes =
        ring_volume(call.kind, call.buffer_elems, call.elem_bytes, rank % ranks, ranks).sent_bytes;
    call.wire_bytes = wire_bytes(call.kind, call.buffer_elems, call.elem_bytes, ranks);
  }
  return out;
}

WhatIf predict_world(const TrainConfig& config, const TrainResult& result, int world) {
  ZL_CHECK(world >= 1, "--what-if-world {} is invalid: use 1 or more ranks", world);
  ZL_CHECK(config.gpus_per_node == kOneNode || world % config.gpus_per_node == 0,
           "--what-if-world {} is not a whole number of nodes of --gpus-per-node {}: predict a "
           "multiple of it",
           world, config.gpus_per_node);
  ZL_CHECK(config.engine != EngineKind::Reference,
           "--what-if-world needs a distributed engine (--stage 0-3): the reference makes no "
           "collective calls");
  ZL_CHECK(config.record_timeline && !result.timelines.empty() &&
               !result.timelines.front().steps.empty(),
           "--what-if-world needs the run's timeline programs: train with record_timeline");
  const int stage = stage_of(config.engine);
  const std::int64_t steps = static_cast<std::int64_t>(result.timelines.front().steps.size());
  WhatIf what_if{.measured = {},
                 .predicted = {},
                 .engine = engine_label(config),
                 .link = config.gpus_per_node == kOneNode
                             ? config.link.name
                             : fmt::format("{} inside nodes of {}, {} across", config.link.name,
                                           config.gpus_per_node, config.link_across.name),
                 .device = config.device ? config.device->name : "cpu"};

  WorldFigures& measured = what_if.measured;
  measured.world = config.world;
  fill_times(measured, result.timelines);
  measured.sent_bytes = sent_bytes_per_step(result.timelines.front().program, steps);
  const MemoryLedger& ledger = result.ranks.front().memory;
  measured.model_state_bytes = ledger.model_state_bytes();
  measured.peak_bytes = ledger.total_peak_bytes();

  const bool hybrid = hybrid_sharded(config);
  const int hpz_ranks = config.features.hpz_partition_ranks;
  ZL_CHECK(stage < 3 || hpz_ranks <= 1 || world % hpz_ranks == 0,
           "--what-if-world {} is not a whole number of hpZ partitions of {}: predict a multiple "
           "of zero_hpz_partition_size",
           world, hpz_ranks);
  const WorldScaling scaling{
      .from_world = config.world,
      .to_world = world,
      .gpus_per_node = config.gpus_per_node,
      .layout_from = state_shard_ranks(config, config.world),
      .layout_to = state_shard_ranks(config, world),
      .sharded_update = stage > 0,
      .replicas_across_nodes = hybrid || config.features.quantized_gradients};
  std::vector<std::vector<TimelineOp>> programs;
  for (const auto& rank : result.timelines) {
    programs.push_back(program_for_world(rank.program, rank.rank, scaling));
  }
  WorldFigures& predicted = what_if.predicted;
  predicted.world = world;
  fill_times(predicted, replay(programs, config.link, config.host_link, config.disk_link, world,
                               false, node_links(config)));
  predicted.sent_bytes = sent_bytes_per_step(programs.front(), steps);
  const EstimateOptions options = estimate_options(config.features);
  predicted.model_state_bytes =
      estimate_ledger(state_elems(model_units(config), scaling.layout_to, options), options, stage)
          .total_bytes();
  predicted.peak_bytes =
      measured.peak_bytes - measured.model_state_bytes + predicted.model_state_bytes;
  return what_if;
}

std::string format_what_if(const WhatIf& what_if) {
  const WorldFigures& m = what_if.measured;
  const WorldFigures& p = what_if.predicted;
  std::string text = fmt::format(
      "\nwhat-if: {} on {} ranks, predicted from the {} measured (link {}, device {}); per step, "
      "simulated, slowest rank\n",
      what_if.engine, p.world, m.world, what_if.link, what_if.device);
  text += fmt::format("{:<22} {:>16} {:>16}\n", "", fmt::format("measured W={}", m.world),
                      fmt::format("predicted W={}", p.world));
  auto row_ms = [&](std::string_view name, double measured, double predicted) {
    text += fmt::format("{:<22} {:>16.3f} {:>16.3f}\n", name, measured, predicted);
  };
  auto row_bytes = [&](std::string_view name, std::int64_t measured, std::int64_t predicted) {
    text += fmt::format("{:<22} {:>16} {:>16}\n", name, measured, predicted);
  };
  row_ms("step_ms", m.step_ms, p.step_ms);
  row_ms("compute_ms", m.compute_ms, p.compute_ms);
  row_ms("comm_ms", m.comm_ms, p.comm_ms);
  row_ms("exposed_comm_ms", m.exposed_comm_ms, p.exposed_comm_ms);
  if (m.copy_ms > 0.0) row_ms("copy_ms", m.copy_ms, p.copy_ms);
  row_bytes("sent_B (rank 0)", m.sent_bytes, p.sent_bytes);
  row_bytes("model_states_B", m.model_state_bytes, p.model_state_bytes);
  row_bytes("peak_B", m.peak_bytes, p.peak_bytes);
  text +=
      "compute per rank as measured (same micro-batch per rank; a sharded update scales by W/N); "
      "comm re-costed for N; model states from the estimator\n";
  return text;
}

nlohmann::json what_if_json(const WhatIf& what_if) {
  return {{"engine", what_if.engine},
          {"link", what_if.link},
          {"device", what_if.device},
          {"measured", figures_json(what_if.measured)},
          {"predicted", figures_json(what_if.predicted)}};
}

}  // namespace zl
