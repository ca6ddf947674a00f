// offload_timeline_test.cpp — offload's host copies on the simulated timeline of whole training
// runs: every copy the traffic ledger counts costs latency + bytes / bandwidth on the host link
// (the runs' copy time is that closed form over the ledger's bytes); a replay of the recorded
// programs and the what-if at the measured world give the live times; a run without offload has
// no copy and no host-link time; the host link never changes a result; `zerolab train
// --host-link` reaches the summary, the trace (copies carrying the ledger's bytes) and the
// progress line; the NVMe tier's swap-file reads and writes are priced on the disk link the same
// way.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "ckpt/test_files.hpp"
#include "cli/what_if.hpp"
#include "run/compare.hpp"
#include "support/command.hpp"
#include "support/small_config.hpp"
#include "support/test_paths.hpp"
#include "trace.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// A new folder for one test's swap files, named for it and this process.
fs::path swap_folder(const std::string& name) {
  const fs::path folder =
      fs::temp_directory_path() / ("zl_" + name + "_" + std::to_string(::getpid()));
  fs::create_directories(folder);
  return folder;
}

TrainConfig recorded(EngineKind engine) {
  TrainConfig config = small_config();
  config.engine = engine;
  config.record_timeline = true;
  return config;
}

// ZeRO-3 with its parameter shards on the host (bf16): per step, each unit's shard goes up for
// the forward gather and again for the backward one, and back after the update.
TrainConfig offload_param() {
  TrainConfig config = recorded(EngineKind::Zero3);
  config.features.precision = DType::BF16;
  config.features.offload_param = true;
  return config;
}

// ZeRO-2 with ZeRO-Offload (fp32): per step, each unit's gradient shard goes to the host and its
// updated parameters come back.
TrainConfig offload_optimizer() {
  TrainConfig config = recorded(EngineKind::Zero2);
  config.features.offload_optimizer = true;
  return config;
}

std::int64_t copy_ops(const std::vector<TimelineOp>& program) {
  return std::ranges::count(program, TimelineOp::Kind::Copy, &TimelineOp::kind);
}

TEST(OffloadTimeline, EveryCopyCostsLatencyPlusBytesOverBandwidth) {
  const std::pair<TrainConfig, int> cases[] = {{offload_param(), 3}, {offload_optimizer(), 2}};
  for (const auto& [config, copies_per_unit] : cases) {
    const TrainResult result = train(config);
    const auto units = static_cast<std::int64_t>(result.layout.size());
    const HostLinkPreset& link = config.host_link;
    for (int r = 0; r < config.world; ++r) {
      const TrafficLedger& traffic = result.ranks[r].traffic;
      const TimelineRecord& timeline = result.timelines[r];
      const std::int64_t copies = copies_per_unit * units * config.steps;
      ASSERT_EQ(copy_ops(timeline.program), copies) << engine_name(config.engine) << " rank " << r;
      const std::int64_t bytes = traffic.to_host_bytes() + traffic.to_device_bytes();
      ASSERT_GT(bytes, 0);
      // The closed form: n copies of latency each, and all their bytes over the bandwidth.
      const double closed_ms = static_cast<double>(copies) * link.latency_us / 1e3 +
                               static_cast<double>(bytes) / (link.gbps * 1e9) * 1e3;
      EXPECT_NEAR(timeline.totals().copy_ms, closed_ms, 1e-12 * closed_ms)
          << engine_name(config.engine) << " rank " << r;
      for (const auto& step : timeline.steps) {
        EXPECT_GT(step.copy_ms, 0.0);
        EXPECT_GE(step.step_ms, step.compute_ms + step.exposed_comm_ms + step.copy_ms - 1e-9);
      }
    }
  }
}

TEST(OffloadTimeline, ReplayAndTheWhatIfAtTheMeasuredWorldGiveTheLiveTimes) {
  for (const TrainConfig& config : {offload_param(), offload_optimizer()}) {
    const TrainResult result = train(config);
    std::vector<std::vector<TimelineOp>> programs;
    for (const auto& rank : result.timelines) programs.push_back(rank.program);
    const auto replayed =
        replay(programs, config.link, config.host_link, config.disk_link, config.world);
    for (int r = 0; r < config.world; ++r) {
      const auto& live = result.timelines[r].steps;
      ASSERT_EQ(replayed[r].steps.size(), live.size());
      for (std::size_t s = 0; s < live.size(); ++s) {
        EXPECT_EQ(replayed[r].steps[s].step_ms, live[s].step_ms) << "rank " << r << " step " << s;
        EXPECT_EQ(replayed[r].steps[s].copy_ms, live[s].copy_ms) << "rank " << r << " step " << s;
        EXPECT_EQ(replayed[r].steps[s].exposed_comm_ms, live[s].exposed_comm_ms);
      }
    }
    const WhatIf same = predict_world(config, result, config.world);
    EXPECT_GT(same.measured.copy_ms, 0.0);
    EXPECT_EQ(same.predicted.copy_ms, same.measured.copy_ms);
    EXPECT_EQ(same.predicted.step_ms, same.measured.step_ms);
    // On 4x the ranks each shard, so each copy, is about a quarter: the bandwidth part shrinks.
    const WhatIf larger = predict_world(config, result, 4 * config.world);
    EXPECT_LT(larger.predicted.copy_ms, same.measured.copy_ms);
  }
}

TEST(OffloadTimeline, WithoutOffloadThereIsNoCopyAndTheHostLinkChangesNothing) {
  for (const EngineKind engine : {EngineKind::Ddp, EngineKind::Zero2, EngineKind::Zero3}) {
    const TrainConfig config = recorded(engine);
    const TrainResult result = train(config);
    std::vector<std::vector<TimelineOp>> programs;
    for (const auto& rank : result.timelines) {
      EXPECT_EQ(copy_ops(rank.program), 0) << engine_name(engine);
      EXPECT_EQ(rank.totals().copy_ms, 0.0);
      programs.push_back(rank.program);
    }
    const auto pcie4 = replay(programs, config.link, host_link_preset("pcie4-x16"),
                              config.disk_link, config.world);
    const auto pcie5 = replay(programs, config.link, host_link_preset("pcie5-x16"),
                              config.disk_link, config.world);
    for (int r = 0; r < config.world; ++r) {
      for (std::size_t s = 0; s < pcie4[r].steps.size(); ++s) {
        EXPECT_EQ(pcie4[r].steps[s].step_ms, pcie5[r].steps[s].step_ms) << engine_name(engine);
        EXPECT_EQ(pcie4[r].steps[s].step_ms, result.timelines[r].steps[s].step_ms);
      }
    }
  }
}

TEST(OffloadTimeline, TheHostLinkNeverChangesAResult) {
  TrainConfig config = offload_param();
  config.features.offload_optimizer = true;
  const TrainResult on_pcie5 = train(config);
  config.host_link = host_link_preset("pcie4-x16");
  const TrainResult on_pcie4 = train(config);
  EXPECT_FALSE(first_difference(on_pcie4, on_pcie5));
  EXPECT_GT(on_pcie4.timelines[0].totals().copy_ms, 0.0);
}

// ZeRO-Infinity's swap files on the timeline: each read and write the traffic ledger counts
// costs latency + bytes / bandwidth on the disk link, in the copy time beside the host copies; a
// replay gives the live times, a disk twice as fast saves exactly half the disk's time, and the
// disk link never changes a result.
// Pipelined swaps on the timeline: each read and write goes on the disk stream when it starts
// (its bytes what the traffic ledger counts), the update waits only for what its computation did
// not cover, so the steps' copy time is below the unpipelined run's, whose swaps block; a replay
// gives the live times, and the results are the same bits.
TEST(OffloadTimeline, PipelinedSwapsRunOnTheDiskStreamUnderTheUpdate) {
  const fs::path folder = swap_folder("disk_stream_test");
  TrainConfig config = offload_optimizer();
  config.features.nvme_path = folder.string();
  config.disk_link = disk_link_preset("0.05");
  const TrainResult streamed = train(config);
  config.features.pipeline_read = true;
  config.features.pipeline_write = true;
  const TrainResult pipelined = train(config);
  EXPECT_FALSE(first_difference(pipelined, streamed));
  std::vector<std::vector<TimelineOp>> programs;
  for (int r = 0; r < config.world; ++r) {
    const TimelineRecord& timeline = pipelined.timelines[r];
    programs.push_back(timeline.program);
    std::int64_t step_bytes = 0, starts = 0, waits = 0;
    bool in_step = false;
    for (const TimelineOp& op : timeline.program) {
      if (op.kind == TimelineOp::Kind::BeginStep) in_step = true;
      if (op.kind == TimelineOp::Kind::EndStep) in_step = false;
      if (op.kind == TimelineOp::Kind::DiskStart) {
        ++starts;
        if (in_step) step_bytes += op.copy_bytes;
      }
      if (op.kind == TimelineOp::Kind::DiskWait) ++waits;
      EXPECT_FALSE(op.kind == TimelineOp::Kind::Copy && op.disk) << "a pipelined swap blocked";
    }
    // Per step and owned element: the master, m and v read and written (24 B).
    std::int64_t owned_elems = 0;
    for (const auto& unit : pipelined.layout) owned_elems += unit.shard_elems;
    EXPECT_EQ(step_bytes, 24 * owned_elems * config.steps) << "rank " << r;
    EXPECT_EQ(waits, starts);
    EXPECT_LT(timeline.totals().copy_ms, streamed.timelines[r].totals().copy_ms) << "rank " << r;
  }
  const auto replayed =
      replay(programs, config.link, config.host_link, config.disk_link, config.world);
  for (int r = 0; r < config.world; ++r) {
    EXPECT_EQ(replayed[r].totals().copy_ms, pipelined.timelines[r].totals().copy_ms) << r;
  }
  EXPECT_TRUE(fs::is_empty(folder));
  fs::remove_all(folder);
}

// ZeRO-3's parameter shards on the NVMe tier through offload_param.buffer_count swap buffers: with
// one, each read and write blocks; with five, the reads of the next visits' and units' shards go
// ahead on the disk stream and the updated shards go out while the next units update. Both move
// the same bytes (no shard is read twice), every start is waited for, the steps' copy time drops,
// a replay gives the live times, and the results are the same bits.
TEST(OffloadTimeline, ParameterReadsGoAheadAndWritesGoOnThroughTheSwapBuffers) {
  const fs::path folder = swap_folder("param_stream_test");
  TrainConfig config = offload_param();
  config.features.offload_optimizer = true;
  config.features.param_nvme_path = folder.string();
  config.disk_link = disk_link_preset("0.05");
  config.features.param_buffer_count = 1;
  const TrainResult waiting = train(config);
  config.features.param_buffer_count = 5;
  const TrainResult pipelined = train(config);
  EXPECT_FALSE(first_difference(pipelined, waiting));
  std::vector<std::vector<TimelineOp>> programs;
  for (int r = 0; r < config.world; ++r) {
    // The steps' disk bytes, and their reads that go ahead: waited for after other work.
    struct StepDisk {
      std::int64_t bytes = 0, reads_ahead = 0;
    };
    const auto step_disk = [](const TimelineRecord& timeline) {
      StepDisk disk;
      std::int64_t starts = 0, waits = 0;
      bool in_step = false;
      const std::vector<TimelineOp>& program = timeline.program;
      for (std::size_t i = 0; i < program.size(); ++i) {
        const TimelineOp& op = program[i];
        if (op.kind == TimelineOp::Kind::BeginStep) in_step = true;
        if (op.kind == TimelineOp::Kind::EndStep) in_step = false;
        if (op.kind == TimelineOp::Kind::DiskStart) {
          ++starts;
          if (in_step) disk.bytes += op.copy_bytes;
          const bool waited_next = i + 1 < program.size() &&
                                   program[i + 1].kind == TimelineOp::Kind::DiskWait &&
                                   program[i + 1].disk_id == op.disk_id;
          if (in_step && op.disk_io == DiskIo::Read && !waited_next) ++disk.reads_ahead;
        }
        if (op.kind == TimelineOp::Kind::DiskWait) ++waits;
        if (in_step && op.kind == TimelineOp::Kind::Copy && op.disk) disk.bytes += op.copy_bytes;
      }
      EXPECT_EQ(waits, starts);
      return disk;
    };
    // Per step and owned bf16 element: read for the forward gather, the backward one and the
    // update, and written after it (8 B). Ahead of their use: every read but the update's first
    // (forward's first starts with the micro-batch, backward's first while forward ends).
    std::int64_t owned_elems = 0;
    for (const auto& unit : pipelined.layout) owned_elems += unit.shard_elems;
    const StepDisk waited = step_disk(waiting.timelines[r]);
    const StepDisk ahead = step_disk(pipelined.timelines[r]);
    EXPECT_EQ(waited.bytes, 8 * owned_elems * config.steps) << "rank " << r;
    EXPECT_EQ(ahead.bytes, 8 * owned_elems * config.steps) << "rank " << r;
    EXPECT_EQ(waited.reads_ahead, 0) << "rank " << r;
    const auto units = static_cast<std::int64_t>(pipelined.layout.size());
    EXPECT_EQ(ahead.reads_ahead, (3 * units - 1) * config.steps) << "rank " << r;
    EXPECT_LT(pipelined.timelines[r].totals().copy_ms, waiting.timelines[r].totals().copy_ms)
        << "rank " << r;
    programs.push_back(pipelined.timelines[r].program);
  }
  const auto replayed =
      replay(programs, config.link, config.host_link, config.disk_link, config.world);
  for (int r = 0; r < config.world; ++r) {
    EXPECT_EQ(replayed[r].totals().copy_ms, pipelined.timelines[r].totals().copy_ms) << r;
  }
  EXPECT_TRUE(fs::is_empty(folder));
  fs::remove_all(folder);
}

TEST(OffloadTimeline, EverySwapReadAndWriteCostsLatencyPlusBytesOverTheDiskLink) {
  const fs::path folder = swap_folder("disk_link_test");
  TrainConfig config = offload_param();
  config.features.offload_optimizer = true;
  config.features.nvme_path = folder.string();
  config.features.param_nvme_path = folder.string();
  config.features.param_buffer_count = 1;  // each parameter read and write waits at once
  config.disk_link = disk_link_preset("2.5");
  const TrainResult result = train(config);
  std::vector<std::vector<TimelineOp>> programs;
  std::vector<double> step_disk_ms;  // per rank: the steps' disk bytes over the disk link
  for (int r = 0; r < config.world; ++r) {
    const TrafficLedger& traffic = result.ranks[r].traffic;
    const TimelineRecord& timeline = result.timelines[r];
    programs.push_back(timeline.program);
    // The steps' copies, host and disk, make their copy time.
    std::int64_t step_disk_bytes = 0, step_host_ops = 0;
    bool in_step = false;
    for (const TimelineOp& op : timeline.program) {
      if (op.kind == TimelineOp::Kind::BeginStep) in_step = true;
      if (op.kind == TimelineOp::Kind::EndStep) in_step = false;
      if (in_step && op.kind == TimelineOp::Kind::DiskStart) step_disk_bytes += op.copy_bytes;
      if (op.kind != TimelineOp::Kind::Copy) continue;
      if (in_step && op.disk) step_disk_bytes += op.copy_bytes;
      if (in_step && !op.disk) ++step_host_ops;
    }
    // Per step and owned element: the master, m and v read and written (24 B), and the bf16
    // shard read for the forward gather, the backward one and the update, then written (8 B).
    std::int64_t owned_elems = 0;
    for (const auto& unit : result.layout) owned_elems += unit.shard_elems;
    EXPECT_EQ(step_disk_bytes, 32 * owned_elems * config.steps) << "rank " << r;
    step_disk_ms.push_back(static_cast<double>(step_disk_bytes) / 2.5e9 * 1e3);
    const std::int64_t host_bytes = traffic.to_host_bytes() + traffic.to_device_bytes();
    const HostLinkPreset& host = config.host_link;
    const double closed_ms = static_cast<double>(step_host_ops) * host.latency_us / 1e3 +
                             static_cast<double>(host_bytes) / (host.gbps * 1e9) * 1e3 +
                             step_disk_ms.back();
    EXPECT_NEAR(timeline.totals().copy_ms, closed_ms, 1e-9 * closed_ms) << "rank " << r;
  }
  const auto replayed =
      replay(programs, config.link, config.host_link, config.disk_link, config.world);
  const auto faster =
      replay(programs, config.link, config.host_link, disk_link_preset("5"), config.world);
  for (int r = 0; r < config.world; ++r) {
    EXPECT_EQ(replayed[r].totals().copy_ms, result.timelines[r].totals().copy_ms) << r;
    EXPECT_NEAR(replayed[r].totals().copy_ms - faster[r].totals().copy_ms, step_disk_ms[r] / 2,
                1e-9 * step_disk_ms[r])
        << r;
  }
  config.disk_link = disk_link_preset(kDefaultDiskLink);
  EXPECT_FALSE(first_difference(train(config), result));
  EXPECT_TRUE(fs::is_empty(folder));
  fs::remove_all(folder);
}

TEST(OffloadTimeline, ADiskLinkIsAPresetOrABandwidth) {
  EXPECT_EQ(disk_link_preset("nvme-gen4").gbps, 7.0);
  const DiskLinkPreset measured = disk_link_preset("3.25");
  EXPECT_EQ(measured.gbps, 3.25);
  EXPECT_EQ(measured.latency_us, 0.0);
  for (const char* bad : {"0", "-1", "nan", "inf", "fast", "3GB"}) {
    try {
      disk_link_preset(bad);
      ADD_FAILURE() << bad << " was taken";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()),
                fmt::format("disk link {} is unknown: use one of nvme-gen4, or a bandwidth in GB/s "
                            "above 0 (zerolab bench nvme --path DIR measures a folder's)",
                            bad));
    }
  }
}

class OffloadTimelineCli : public ::testing::Test {
 protected:
  test::TempDir temp_;
  const fs::path& dir_ = temp_.path();
};

TEST_F(OffloadTimelineCli, HostLinkReachesTheSummaryTheTraceAndTheProgressLine) {
  const fs::path summary = dir_ / "summary.json";
  const fs::path trace = dir_ / "trace.json";
  const auto run = run_command(fmt::format(
      "{} train --layers 3 --width 24 --in 8 --classes 4 --steps 2 --micro-batch 4 --stage 3 "
      "--world 2 --bf16 --offload-param --host-link pcie4-x16 --summary {} --trace {}",
      zl::test::zerolab_binary(), summary.string(), trace.string()));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("host link pcie4-x16 (10 us + bytes / 25 GB/s)"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find(" copy "), std::string::npos) << run.out;  // the progress line
  const json ledgers = json::parse(slurp(summary));
  EXPECT_EQ(ledgers["timeline"]["host_link"], "pcie4-x16");
  EXPECT_EQ(ledgers["timeline"]["host_gbps"], 25.0);
  EXPECT_GT(ledgers["copy_ms"].get<double>(), 0.0);
  std::vector<std::int64_t> copied_bytes(2, 0);
  const json document = json::parse(slurp(trace));
  for (const auto& event : document["traceEvents"]) {
    if (event["ph"] != "X" || event["cat"] != "copy") continue;
    EXPECT_EQ(event["tid"], kHostTrack);
    copied_bytes[event["pid"].get<int>()] += event["args"]["bytes"].get<std::int64_t>();
  }
  for (int r = 0; r < 2; ++r) {
    const json& comm = ledgers["ranks"][r]["comm"];
    EXPECT_GT(ledgers["ranks"][r]["copy_ms"].get<double>(), 0.0);
    EXPECT_EQ(copied_bytes[r],
              comm["to_host"].get<std::int64_t>() + comm["to_device"].get<std::int64_t>())
        << "rank " << r;
  }
}

}  // namespace
}  // namespace zl
