// trace_cli_test.cpp — the simulated timeline through `zerolab train` and the what-if: --trace
// writes valid Chrome trace JSON with one process per rank whose collectives carry exactly the
// bytes of the traffic ledger; --summary and --metrics carry compute_ms, comm_ms and
// exposed_comm_ms with exposed <= comm (== without overlap_comm); overlap_comm puts collectives
// on the comm stream as async calls; --what-if-world at the measured W gives the measured
// figures back, at N grows each unit's comm by the ring factor (N-1)/N over (W-1)/W and takes
// model states from the estimator. Times are measurements: checked for structure, not values.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>

#include "ckpt/test_files.hpp"
#include "cli/what_if.hpp"
#include "engines/estimate.hpp"
#include "support/command.hpp"
#include "support/small_config.hpp"
#include "support/test_paths.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class TraceCli : public ::testing::Test {
 protected:
  static CommandResult zerolab(const std::string& args) {
    return run_command(fmt::format("{} {}", zl::test::zerolab_binary(), args));
  }
  test::TempDir temp_;
  const fs::path& dir_ = temp_.path();
};

const std::string kRun =
    "train --layers 3 --width 24 --in 8 --classes 4 --steps 3 --micro-batch 4 --quiet";

TEST_F(TraceCli, TraceHasOneProcessPerRankAndTheLedgersBytesOnItsCollectives) {
  const fs::path trace = dir_ / "trace.json";
  const fs::path summary = dir_ / "summary.json";
  const auto run = zerolab(fmt::format("{} --stage 3 --world 3 --trace {} --summary {}", kRun,
                                       trace.string(), summary.string()));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const json document = json::parse(slurp(trace));
  const json ledgers = json::parse(slurp(summary));
  EXPECT_EQ(document["otherData"]["world"], 3);
  EXPECT_EQ(document["otherData"]["link"], "h100-nvlink");
  std::set<int> processes;
  std::vector<std::int64_t> step_bytes(3, 0);
  std::vector<int> steps(3, 0);
  for (const auto& event : document["traceEvents"]) {
    const int pid = event["pid"];
    ASSERT_TRUE(pid >= 0 && pid < 3) << event.dump();
    if (event["ph"] == "M" && event["name"] == "process_name") processes.insert(pid);
    if (event["ph"] != "X") continue;
    if (event["cat"] == "step") ++steps[pid];
    if (event["cat"] != "comm") continue;
    EXPECT_EQ(event["tid"], 2) << event.dump();
    if (event["args"]["step"].get<int>() >= 0)
      step_bytes[pid] += event["args"]["bytes"].get<std::int64_t>();
  }
  EXPECT_EQ(processes, (std::set<int>{0, 1, 2}));
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(steps[r], 3) << "rank " << r;
    // The ledger counts the steps' traffic; the trace's collectives in steps carry the same bytes.
    EXPECT_EQ(step_bytes[r], ledgers["ranks"][r]["comm"]["sent"].get<std::int64_t>()) << r;
  }
}

TEST_F(TraceCli, SummaryAndMetricsCarryComputeCommAndExposedComm) {
  const fs::path summary = dir_ / "summary.json";
  const fs::path metrics = dir_ / "metrics.jsonl";
  const auto run =
      zerolab(fmt::format("{} --stage 2 --world 2 --link ib-400g --summary {} "
                          "--metrics {}",
                          kRun, summary.string(), metrics.string()));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("simulated timeline, link ib-400g"), std::string::npos) << run.out;
  const json document = json::parse(slurp(summary));
  EXPECT_EQ(document["timeline"]["link"], "ib-400g");
  EXPECT_EQ(document["timeline"]["busbw_gbps"], 45.0);
  double most_comm_ms = 0.0;
  for (const auto& rank : document["ranks"]) {
    const double comm_ms = rank["comm_ms"];
    EXPECT_GT(comm_ms, 0.0);
    EXPECT_GT(rank["compute_ms"].get<double>(), 0.0);
    EXPECT_EQ(rank["exposed_comm_ms"].get<double>(), comm_ms);  // no overlap_comm: all exposed
    most_comm_ms = std::max(most_comm_ms, comm_ms);
  }
  EXPECT_EQ(document["comm_ms"].get<double>(), most_comm_ms);  // overall: the largest rank's
  EXPECT_TRUE(document.contains("compute_ms") && document.contains("exposed_comm_ms"));
  std::istringstream lines(slurp(metrics));
  int count = 0;
  for (std::string line; std::getline(lines, line); ++count) {
    const json step = json::parse(line);
    EXPECT_GT(step["comm_ms"].get<double>(), 0.0) << line;
    EXPECT_LE(step["exposed_comm_ms"].get<double>(), step["comm_ms"].get<double>()) << line;
    EXPECT_GE(step["sim_step_ms"].get<double>(), step["compute_ms"].get<double>()) << line;
  }
  EXPECT_EQ(count, 3);
}

TEST_F(TraceCli, ProgressLinesShowTheSimulatedStepAndDeviceScaling) {
  const auto run = zerolab(
      "train --layers 2 --width 16 --in 4 --classes 4 --steps 2 --stage 1 --world 2 --device h100");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("step     2/2  loss "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find(" ms  sim "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("exposed "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("device h100 (CPU time x "), std::string::npos) << run.out;
}

TEST_F(TraceCli, WhatIfPrintsATableAndTheSummaryCarriesIt) {
  const fs::path summary = dir_ / "summary.json";
  const auto run = zerolab(fmt::format("{} --stage 3 --world 2 --what-if-world 64 --summary {}",
                                       kRun, summary.string()));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("what-if: zero3 on 64 ranks, predicted from the 2 measured"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("exposed_comm_ms"), std::string::npos);
  const json what_if = json::parse(slurp(summary))["what_if"];
  EXPECT_EQ(what_if["measured"]["world"], 2);
  EXPECT_EQ(what_if["predicted"]["world"], 64);
  EXPECT_LT(what_if["predicted"]["model_state_bytes"].get<std::int64_t>(),
            what_if["measured"]["model_state_bytes"].get<std::int64_t>());
}

TEST_F(TraceCli, BadTimelineFlagsFailInOneLine) {
  const std::pair<std::string, std::string> cases[] = {
      {"--link carrier-pigeon",
       "link carrier-pigeon is unknown: use one of h100-nvlink, a100-nvlink, ib-400g, pcie4"},
      {"--device tpu", "device tpu is unknown: use one of cpu, a100, h100"},
      {"--host-link usb2", "host link usb2 is unknown: use one of pcie4-x16, pcie5-x16"},
      {"--what-if-world 0", "--what-if-world 0 is invalid: use 1 or more ranks"},
      {"--engine reference --what-if-world 8",
       "--what-if-world needs a distributed engine (--stage 0-3)"},
      {"--trace /nonexistent-dir/trace.json", "--trace"},
      {"--link-across pigeon", "link pigeon is unknown"},
      {"--nics-per-node 0", "--nics-per-node 0 is invalid"},
      {"--stage 3 --world 4 --gpus-per-node 2 --what-if-world 5",
       "--what-if-world 5 is not a whole number of nodes of --gpus-per-node 2"},
      {"--stage 3 --world 8 --gpus-per-node 4 --hpz-partition-size 8 --what-if-world 12",
       "--what-if-world 12 is not a whole number of hpZ partitions of 8"},
  };
  for (const auto& [flags, message] : cases) {
    const auto run = zerolab(fmt::format("{} {}", kRun, flags));
    EXPECT_NE(run.exit_code, 0) << flags;
    EXPECT_NE(run.err.find(message), std::string::npos) << flags << ": " << run.err;
    EXPECT_EQ(std::ranges::count(run.err, '\n'), 1) << flags << ": " << run.err;
  }
}

// ---- the library: overlap and the what-if ---------------------------------------------------

TrainConfig recorded(EngineKind engine, int world) {
  TrainConfig config = small_config();
  config.engine = engine;
  config.world = world;
  config.record_timeline = true;
  return config;
}

TEST_F(TraceCli, OverlapCommIssuesAsyncCollectivesAndExposesNoMoreThanItsComm) {
  for (const EngineKind engine : {EngineKind::Ddp, EngineKind::Zero2, EngineKind::Zero3}) {
    TrainConfig config = recorded(engine, 3);
    config.features.overlap_comm = true;
    const TrainResult result = train(config);
    int async_calls = 0;
    for (const auto& rank : result.timelines) {
      for (const auto& event : rank.events) async_calls += event.async ? 1 : 0;
      for (const auto& step : rank.steps) {
        EXPECT_LE(step.exposed_comm_ms, step.comm_ms + 1e-9) << engine_name(engine);
        EXPECT_GE(step.step_ms, step.compute_ms + step.exposed_comm_ms - 1e-9);
      }
    }
    EXPECT_GT(async_calls, 0) << engine_name(engine);
  }
}

TEST_F(TraceCli, WhatIfAtTheMeasuredWorldGivesTheMeasuredFigures) {
  for (const EngineKind engine : {EngineKind::Ddp, EngineKind::Zero1, EngineKind::Zero3}) {
    const TrainConfig config = recorded(engine, 3);
    const WhatIf same = predict_world(config, train(config), 3);
    EXPECT_EQ(same.predicted.step_ms, same.measured.step_ms) << engine_name(engine);
    EXPECT_EQ(same.predicted.compute_ms, same.measured.compute_ms);
    EXPECT_EQ(same.predicted.comm_ms, same.measured.comm_ms);
    EXPECT_EQ(same.predicted.exposed_comm_ms, same.measured.exposed_comm_ms);
    EXPECT_EQ(same.predicted.sent_bytes, same.measured.sent_bytes);
    // The estimator is exact for the engines' model states (tests/estimate), so memory too.
    EXPECT_EQ(same.predicted.model_state_bytes, same.measured.model_state_bytes);
    EXPECT_EQ(same.predicted.peak_bytes, same.measured.peak_bytes);
  }
}

// Hybrid sharding and hpZ run calls in groups of ranks: replayed at the measured world, each
// group's call starts when its own ranks are ready, so the figures are the measured ones; on
// more nodes of the same size the calls inside a node keep their cost (HSDP's units stay laid
// out for a node, hpZ's backward gathers stay in their partition) and the model states follow
// the estimate: HSDP's a node's, hpZ's the world's plus its secondary shards.
TEST_F(TraceCli, WhatIfFollowsHybridShardingAndHpzGroups) {
  for (const bool hpz : {false, true}) {
    TrainConfig config = recorded(EngineKind::Zero3, 4);
    config.mlp = {.layers = 2, .width = 64, .in = 64, .classes = 64};  // units of 4,160 elements
    config.gpus_per_node = 2;
    (hpz ? config.features.hpz_partition_ranks : config.features.shard_group_ranks) = 2;
    const TrainResult result = train(config);
    const WhatIf same = predict_world(config, result, 4);
    SCOPED_TRACE(same.engine);
    EXPECT_EQ(same.engine, hpz ? "zero3 hpz, partitions of 2" : "zero3 hsdp, shard groups of 2");
    EXPECT_EQ(same.predicted.step_ms, same.measured.step_ms);
    EXPECT_EQ(same.predicted.comm_ms, same.measured.comm_ms);
    EXPECT_EQ(same.predicted.exposed_comm_ms, same.measured.exposed_comm_ms);
    EXPECT_EQ(same.predicted.sent_bytes, same.measured.sent_bytes);
    EXPECT_EQ(same.predicted.model_state_bytes, same.measured.model_state_bytes);
    const WhatIf more = predict_world(config, result, 16);
    const EstimateOptions options = estimate_options(config.features);
    EXPECT_EQ(
        more.predicted.model_state_bytes,
        estimate_ledger(state_elems(checked_units(config.mlp), hpz ? 16 : 2, options), options, 3)
            .total_bytes());
    // Each group call inside a node costs what it cost measured, span by span.
    const WorldScaling scaling{.from_world = 4,
                               .to_world = 16,
                               .gpus_per_node = 2,
                               .layout_from = hpz ? 4 : 2,
                               .layout_to = hpz ? 16 : 2,
                               .sharded_update = true,
                               .replicas_across_nodes = !hpz};
    const auto& program = result.timelines[0].program;
    const auto predicted = program_for_world(program, 0, scaling);
    int inside = 0, across = 0;
    for (std::size_t i = 0; i < program.size(); ++i) {
      const CallInfo& at_w = program[i].call;
      const CallInfo& at_n = predicted[i].call;
      if (program[i].kind != TimelineOp::Kind::Issue || at_w.group_ranks == 0) continue;
      if (at_w.group_nodes == 1) {
        ++inside;
        EXPECT_EQ(at_n.group_ranks, 2);
        EXPECT_EQ(at_n.wire_bytes, wire_bytes(at_n.kind, at_n.buffer_elems, at_n.elem_bytes, 2));
        // HSDP's units stay laid out for a node; hpZ's are padded for the world
        if (!hpz) {
          EXPECT_EQ(at_n.buffer_elems, at_w.buffer_elems);
        }
      } else {
        ++across;  // hybrid sharding's replicas: one rank on each of the 2, then the 8 nodes
        EXPECT_EQ(at_w.group_ranks, 2);
        EXPECT_EQ(at_n.group_ranks, 8);
        EXPECT_EQ(at_n.group_nodes, 8);
        EXPECT_EQ(at_n.buffer_elems, at_w.buffer_elems);
      }
    }
    EXPECT_GT(inside, 0);
    EXPECT_EQ(across > 0, !hpz);
    EXPECT_GT(more.predicted.comm_ms, same.predicted.comm_ms);
  }
}

// ZeRO++'s quantized collectives replay too: int8 gathers over the world keep their bytes, qgZ's
// all-to-all inside a node keeps its 2 ranks and the one across the nodes grows to the predicted
// world's nodes; at the measured world the prediction is the measurement.
TEST_F(TraceCli, WhatIfReplaysQuantizedCollectives) {
  TrainConfig config = recorded(EngineKind::Zero3, 4);
  config.mlp = {.layers = 2, .width = 64, .in = 64, .classes = 64};
  config.gpus_per_node = 2;
  config.features.quantized_weights = true;
  config.features.quantized_gradients = true;
  const TrainResult result = train(config);
  const WhatIf same = predict_world(config, result, 4);
  EXPECT_EQ(same.engine, "zero3 qwz (int8 weights), qgz (int4 gradients)");
  EXPECT_EQ(same.predicted.step_ms, same.measured.step_ms);
  EXPECT_EQ(same.predicted.comm_ms, same.measured.comm_ms);
  EXPECT_EQ(same.predicted.sent_bytes, same.measured.sent_bytes);
  const WhatIf more = predict_world(config, result, 16);
  const auto& program = result.timelines[0].program;
  const auto predicted = program_for_world(program, 0,
                                           {.from_world = 4,
                                            .to_world = 16,
                                            .gpus_per_node = 2,
                                            .layout_from = 4,
                                            .layout_to = 16,
                                            .sharded_update = true,
                                            .replicas_across_nodes = true});
  int inside = 0, across = 0;
  for (std::size_t i = 0; i < program.size(); ++i) {
    const CallInfo& at_w = program[i].call;
    const CallInfo& at_n = predicted[i].call;
    if (program[i].kind != TimelineOp::Kind::Issue || at_w.kind != CollectiveKind::AllToAll) {
      continue;
    }
    EXPECT_EQ(at_n.buffer_elems, at_w.buffer_elems);
    if (at_w.group_nodes == 1) {
      ++inside;
      EXPECT_EQ(at_n.group_ranks, 2);
    } else {
      ++across;
      EXPECT_EQ(at_n.group_ranks, 8);
      EXPECT_EQ(at_n.group_nodes, 8);
    }
  }
  EXPECT_GT(inside, 0);
  EXPECT_EQ(across, inside);
  EXPECT_GT(more.predicted.comm_ms, same.predicted.comm_ms);
  // The what-if replays that program: rank 0's bytes a step are its calls'.
  std::int64_t sent_bytes = 0;
  bool in_step = false;
  for (const TimelineOp& op : predicted) {
    in_step =
        op.kind == TimelineOp::Kind::BeginStep || (in_step && op.kind != TimelineOp::Kind::EndStep);
    if (in_step && op.kind == TimelineOp::Kind::Issue) sent_bytes += op.call.sent_bytes;
  }
  EXPECT_EQ(more.predicted.sent_bytes,
            sent_bytes / static_cast<std::int64_t>(result.timelines[0].steps.size()));
}

TEST_F(TraceCli, WhatIfGrowsEachUnitsCommByTheRingFactor) {
  // 64 -> 64 layers: 4160 elements a unit, padded to 4224 for W = 2 and 4608 for N = 8.
  TrainConfig config = recorded(EngineKind::Zero3, 2);
  config.mlp = {.layers = 2, .width = 64, .in = 64, .classes = 64};
  const int from = 2, to = 8;
  const TrainResult result = train(config);
  const auto& program = result.timelines[0].program;
  const auto predicted = program_for_world(program, 0,
                                           {.from_world = from,
                                            .to_world = to,
                                            .layout_from = from,
                                            .layout_to = to,
                                            .sharded_update = true});
  ASSERT_EQ(predicted.size(), program.size());
  int units = 0;
  double comm_ms = 0.0;  // the predicted comm of the steps, call by call
  bool in_step = false;
  for (std::size_t i = 0; i < program.size(); ++i) {
    if (program[i].kind == TimelineOp::Kind::BeginStep) in_step = true;
    if (program[i].kind == TimelineOp::Kind::EndStep) in_step = false;
    if (program[i].kind != TimelineOp::Kind::Issue || !in_step) continue;
    const CallInfo& at_w = program[i].call;
    const CallInfo& at_n = predicted[i].call;
    comm_ms += collective_ms(config.link, at_n.wire_bytes, to);
    if (at_w.buffer_elems != 4224) continue;  // a whole unit's gather or reduce-scatter
    ++units;
    EXPECT_EQ(at_n.buffer_elems, 4608);
    // wire = S (W-1)/W: at N = 8 it is 7/8 of 4608 elements, at W = 2 half of 4224.
    EXPECT_EQ(at_w.wire_bytes, 4224 * 4 / 2);
    EXPECT_EQ(at_n.wire_bytes, 4608 * 4 * 7 / 8);
  }
  EXPECT_EQ(units, 2 * 3 * 3);  // per step: gather forward, gather and reduce-scatter backward
  const WhatIf what_if = predict_world(config, result, to);
  const double steps = static_cast<double>(config.steps);
  EXPECT_NEAR(what_if.predicted.comm_ms, comm_ms / steps, 1e-9 * comm_ms);
  EXPECT_GT(what_if.predicted.comm_ms, what_if.measured.comm_ms);
  EXPECT_EQ(what_if.predicted.exposed_comm_ms, what_if.predicted.comm_ms);  // no overlap_comm
  EXPECT_LE(what_if.predicted.compute_ms, what_if.measured.compute_ms);     // the update is 1/N
  const EstimateOptions options = estimate_options(config.features);
  EXPECT_EQ(what_if.predicted.model_state_bytes,
            estimate_ledger(state_elems(checked_units(config.mlp), to, options), options, 3)
                .total_bytes());
}

// Two nodes of two GPUs joined by one NIC each: every collective on the timeline takes what
// plan_collective gives for its kind and buffer on those links, on the live run and in the
// what-if's replay at the measured world; more nodes of the same size can be predicted.
TEST_F(TraceCli, NodesPriceEveryCallOnTheirLinks) {
  TrainConfig config = recorded(EngineKind::Zero3, 4);
  config.mlp = {.layers = 2, .width = 64, .in = 64, .classes = 64};
  config.gpus_per_node = 2;
  config.nics_per_node = 1;
  config.link_across = link_preset("pcie4");
  const NodeLinks nodes{.gpus_per_node = 2, .across = config.link_across, .nics_per_node = 1};
  const TrainResult result = train(config);
  int calls = 0;
  for (const auto& event : result.timelines[0].events) {
    if (event.stream != Stream::Comm) continue;
    ++calls;
    const CallInfo& call = event.call;
    const CollectivePlan plan =
        plan_collective(config.link, nodes, call.kind, call.buffer_elems, call.elem_bytes, 4);
    EXPECT_EQ(event.dur_ms, plan.ms) << collective_name(call.kind) << " " << call.buffer_elems;
    EXPECT_EQ(call.hierarchical, plan.hierarchical);
    // Across the nodes costs more than the same call inside one node would.
    EXPECT_GT(event.dur_ms, collective_ms(config.link, call.wire_bytes, 4));
  }
  EXPECT_GT(calls, 0);
  const WhatIf same = predict_world(config, result, 4);
  EXPECT_EQ(same.predicted.comm_ms, same.measured.comm_ms);
  EXPECT_EQ(same.predicted.step_ms, same.measured.step_ms);
  const WhatIf more = predict_world(config, result, 8);
  EXPECT_GT(more.predicted.comm_ms, same.predicted.comm_ms);
  EXPECT_THROW(predict_world(config, result, 6 + 1), Error);
}

}  // namespace
}  // namespace zl
