// host_copy_timeline_test.cpp — host copies (offload) on the simulator's timeline: the host link
// presets and their cost, latency + bytes / bandwidth exactly; a copy blocks the compute stream
// (never the comm stream, and a copy under an async collective is not exposed comm); a live
// SimWorld run's copies are spans on their own stream whose durations add up to the step's
// copy_ms, the pieces of computation they cut keep the name of their span, and a replay of its
// programs gives its times; the trace draws them on the host-copies track.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <vector>

#include "sim_comm.hpp"
#include "sim_test_support.hpp"
#include "trace.hpp"

namespace zl {
namespace simtest {
namespace {

// A host link with round numbers: 1 ms + bytes / 1 GB/s, i.e. 1e-6 ms per byte.
HostLinkPreset test_host_link() {
  return {.name = "test-pcie", .latency_us = 1000.0, .gbps = 1.0, .source = "tests"};
}

SimOptions recording(const HostLinkPreset& host_link) {
  return {.timeline = {.link = link_preset("ib-400g"),
                       .host_link = host_link,
                       .compute_scale = 1.0,
                       .record_program = true,
                       .record_events = true}};
}

std::vector<TimelineEvent> copies_of(const TimelineRecord& rank) {
  std::vector<TimelineEvent> copies;
  for (const auto& event : rank.events) {
    if (event.stream == Stream::Host) copies.push_back(event);
  }
  return copies;
}

// Each rank: two steps of forward, a blocking all_reduce, then an "update" that copies its
// gradient to the host, computes and copies its parameters back (rank r copies (r+1) KB each
// way).
void offload_steps(Comm& comm) {
  RankTimeline& timeline = *sim_timeline(comm);
  std::vector<float> grads(1024, 1.0f);
  const std::int64_t copy_bytes = 1024 * (comm.rank() + 1);
  for (int step = 0; step < 2; ++step) {
    timeline.begin_step(step);
    timeline.mark("forward");
    comm.all_reduce(grads.data(), grads.size(), DType::F32, ReduceOp::Avg);
    burn_cpu_ms(0.2);  // unscale the gradient
    comm.host_copy(HostCopy::ToHost, copy_bytes);
    burn_cpu_ms(0.2);  // the update on the host
    comm.host_copy(HostCopy::ToDevice, copy_bytes);
    timeline.mark("update");
    timeline.end_step();
  }
}

TEST(SimHostCopy, presets_have_the_bandwidths_of_their_sources) {
  EXPECT_EQ(host_link_preset("pcie4-x16").gbps, 25.0);
  EXPECT_EQ(host_link_preset("pcie5-x16").gbps, 50.0);
  EXPECT_EQ(host_link_preset(kDefaultHostLink).name, "pcie5-x16");
  for (const auto& link : host_link_presets()) {
    EXPECT_GT(link.latency_us, 0.0) << link.name;
    EXPECT_FALSE(link.source.empty()) << link.name;
  }
  try {
    host_link_preset("usb2");
    FAIL() << "an unknown host link did not throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "host link usb2 is unknown: use one of pcie4-x16, pcie5-x16");
  }
  // 1 GB over PCIe 4.0 x16 at 25 GB/s: 40 ms, plus 10 us.
  EXPECT_EQ(host_copy_ms(host_link_preset("pcie4-x16"), 1'000'000'000),
            10.0 / 1e3 + 1e9 / 25e9 * 1e3);
  EXPECT_NEAR(host_copy_ms(host_link_preset("pcie4-x16"), 1'000'000'000), 40.01, 1e-9);
}

TEST(SimHostCopy, a_copy_blocks_the_compute_stream_but_not_the_comm_stream) {
  RankClocks clocks(true, true);
  clocks.begin_step(0);
  clocks.compute(1.0, "backward");
  clocks.issue({.number = 1, .kind = CollectiveKind::ReduceScatter}, /*async=*/true, 1.0, 2.0);
  clocks.host_copy(HostCopy::ToHost, 4096, 0.5);  // compute stream [1, 1.5): comm runs on
  EXPECT_EQ(clocks.compute_clock_ms(), 1.5);
  EXPECT_EQ(clocks.comm_clock_ms(), 3.0);
  clocks.wait(1);  // waits 1.5 .. 3, all of it comm
  clocks.host_copy(HostCopy::ToDevice, 4096, 0.25);
  const StepTimes step = clocks.end_step();
  EXPECT_EQ(step.compute_ms, 1.0);
  EXPECT_EQ(step.copy_ms, 0.75);
  EXPECT_EQ(step.comm_ms, 2.0);
  EXPECT_EQ(step.exposed_comm_ms, 1.5);  // the copy under the async call hid half a ms of it
  EXPECT_EQ(step.step_ms, 3.25);
  EXPECT_EQ(clocks.totals().copy_ms, 0.75);
  const TimelineEvent& back = clocks.events().back();
  EXPECT_EQ(back.stream, Stream::Host);
  EXPECT_EQ(back.name, "copy to_device");
  EXPECT_EQ(back.start_ms, 3.0);
  EXPECT_EQ(back.copy_bytes, 4096);
  const auto& program = clocks.program();
  EXPECT_EQ(std::ranges::count(program, TimelineOp::Kind::Copy, &TimelineOp::kind), 2);
  EXPECT_THROW(clocks.host_copy(HostCopy::ToHost, 1, -1.0), Error);
}

// Pipelined swaps: a read or write on the disk stream starts when the disk is free and not before
// the compute clock, runs while compute goes on, and only the part of it compute did not cover
// when the rank waits is copy time; a replay of the program gives the same times.
TEST(SimHostCopy, a_disk_read_started_early_is_hidden_up_to_the_compute_it_runs_under) {
  RankClocks clocks(true, true);
  clocks.begin_step(0);
  clocks.compute(10.0, "update");
  const std::int64_t read = clocks.disk_start(DiskIo::Read, 100, 5.0);  // disk [10, 15)
  clocks.compute(8.0, "update");                                        // compute to 18
  clocks.disk_wait(read);                                               // over: nothing to wait
  EXPECT_EQ(clocks.compute_clock_ms(), 18.0);
  EXPECT_EQ(clocks.totals().copy_ms, 0.0);
  const std::int64_t write = clocks.disk_start(DiskIo::Write, 200, 20.0);  // disk [18, 38)
  const std::int64_t next = clocks.disk_start(DiskIo::Read, 100, 4.0);     // after it: [38, 42)
  clocks.compute(2.0, "update");                                           // compute to 20
  clocks.disk_wait(next);                                                  // waits 20 .. 42
  clocks.disk_wait(write);                                                 // ended at 38
  const StepTimes step = clocks.end_step();
  EXPECT_EQ(step.copy_ms, 22.0);
  EXPECT_EQ(step.compute_ms, 20.0);
  EXPECT_EQ(step.step_ms, 42.0);
  EXPECT_THROW(clocks.disk_wait(write), Error);  // already waited
  std::vector<TimelineEvent> disk;
  for (const auto& event : clocks.events()) {
    if (event.stream == Stream::Disk) disk.push_back(event);
  }
  ASSERT_EQ(disk.size(), 3u);
  EXPECT_EQ(disk[1].name, "disk write");
  EXPECT_EQ(disk[2].start_ms, 38.0);
  const DiskLinkPreset disk_link{.name = "test", .latency_us = 0.0, .gbps = 1.0, .source = ""};
  const auto replayed =
      replay({clocks.program()}, link_preset("ib-400g"), test_host_link(), disk_link, 1);
  // Replayed on a 1 GB/s disk: 100, 200 and 100 bytes take 1e-4, 2e-4 and 1e-4 ms, all hidden.
  EXPECT_EQ(replayed[0].totals().copy_ms, 0.0);
  EXPECT_EQ(replayed[0].totals().step_ms, 20.0);
}

TEST(SimHostCopy, a_live_runs_copies_cost_latency_plus_bytes_over_bandwidth_each) {
  const HostLinkPreset host_link = test_host_link();
  SimWorld sim(3, recording(host_link));
  sim.run(offload_steps);
  for (int r = 0; r < 3; ++r) {
    const TimelineRecord& rank = sim.timeline(r);
    const TrafficLedger& traffic = sim.traffic(r);
    const std::int64_t bytes = 1024 * (r + 1);
    EXPECT_EQ(traffic.to_host_bytes(), 2 * bytes);  // the ledger counts what the timeline prices
    EXPECT_EQ(traffic.to_device_bytes(), 2 * bytes);
    const auto copies = copies_of(rank);
    ASSERT_EQ(copies.size(), 4u) << "rank " << r;
    for (const auto& copy : copies) {
      EXPECT_EQ(copy.dur_ms, 1.0 + static_cast<double>(bytes) / 1e9 * 1e3) << "rank " << r;
      EXPECT_EQ(copy.copy_bytes, bytes);
    }
    ASSERT_EQ(rank.steps.size(), 2u);
    for (const auto& step : rank.steps) {
      // Two copies a step, each latency + bytes / bandwidth: the closed form from the ledger.
      const double closed_ms =
          2 * (host_link.latency_us / 1e3) +
          static_cast<double>(traffic.to_host_bytes() + traffic.to_device_bytes()) / 2 /
              (host_link.gbps * 1e9) * 1e3;
      EXPECT_NEAR(step.copy_ms, closed_ms, 1e-12 * closed_ms) << "rank " << r;
      EXPECT_GE(step.step_ms, step.compute_ms + step.exposed_comm_ms + step.copy_ms - 1e-9);
    }
    // The update's work before and between the copies is still named "update".
    for (std::size_t i = 1; i < rank.events.size(); ++i) {
      const TimelineEvent& before = rank.events[i - 1];
      const bool computation = before.stream == Stream::Compute && before.call.number == 0;
      if (rank.events[i].stream != Stream::Host || !computation) continue;
      EXPECT_EQ(before.name, "update") << "rank " << r << " event " << i;
    }
  }
}

TEST(SimHostCopy, a_lone_rank_pays_only_compute_and_copies) {
  const HostLinkPreset host_link = test_host_link();
  SimWorld one(1, recording(host_link));
  one.run(offload_steps);
  for (const auto& step : one.timeline(0).steps) {
    EXPECT_EQ(step.exposed_comm_ms, 0.0);  // no link: collectives take 0
    // Sums of the same spans, added in another order: equal up to rounding.
    EXPECT_DOUBLE_EQ(step.copy_ms, 2 * host_copy_ms(host_link, 1024));
    EXPECT_NEAR(step.step_ms, step.compute_ms + step.copy_ms, 1e-12 * step.step_ms);
  }
}

TEST(SimHostCopy, replaying_the_recorded_programs_gives_the_recorded_times) {
  const HostLinkPreset host_link = test_host_link();
  const SimOptions options = recording(host_link);
  SimWorld sim(3, options);
  sim.run(offload_steps);
  std::vector<std::vector<TimelineOp>> programs;
  for (int r = 0; r < 3; ++r) programs.push_back(sim.timeline(r).program);
  const auto replayed =
      replay(programs, options.timeline.link, host_link, options.timeline.disk_link, 3, true);
  // On a host link twice as fast only the copies change, each by half its bytes' time.
  HostLinkPreset faster = host_link;
  faster.gbps = 2.0;
  const auto on_faster =
      replay(programs, options.timeline.link, faster, options.timeline.disk_link, 3, false);
  for (int r = 0; r < 3; ++r) {
    const auto& live = sim.timeline(r);
    ASSERT_EQ(replayed[r].steps.size(), live.steps.size());
    for (std::size_t s = 0; s < live.steps.size(); ++s) {
      EXPECT_EQ(replayed[r].steps[s].step_ms, live.steps[s].step_ms) << "rank " << r;
      EXPECT_EQ(replayed[r].steps[s].copy_ms, live.steps[s].copy_ms) << "rank " << r;
      EXPECT_EQ(replayed[r].steps[s].exposed_comm_ms, live.steps[s].exposed_comm_ms);
      EXPECT_DOUBLE_EQ(on_faster[r].steps[s].copy_ms, 2 * host_copy_ms(faster, 1024 * (r + 1)));
      EXPECT_EQ(on_faster[r].steps[s].compute_ms, live.steps[s].compute_ms);
    }
    EXPECT_EQ(replayed[r].events.size(), live.events.size());
  }
}

TEST(SimHostCopy, the_trace_draws_copies_on_the_host_track_with_their_bytes) {
  SimWorld sim(2, recording(test_host_link()));
  sim.run(offload_steps);
  const auto trace = nlohmann::json::parse(
      chrome_trace_json({sim.timeline(0), sim.timeline(1)}, {.engine = "test",
                                                             .world = 2,
                                                             .link = "ib-400g",
                                                             .host_link = "test-pcie",
                                                             .device = "cpu"}));
  EXPECT_EQ(trace["otherData"]["host_link"], "test-pcie");
  int copies = 0;
  for (const auto& event : trace["traceEvents"]) {
    if (event["ph"] == "M" && event["name"] == "thread_name" && event["tid"] == kHostTrack) {
      EXPECT_EQ(event["args"]["name"], "host copies");
    }
    if (event["ph"] != "X" || event["tid"] != kHostTrack) continue;
    ++copies;
    EXPECT_EQ(event["cat"], "copy");
    EXPECT_EQ(event["args"]["bytes"].get<std::int64_t>(), 1024 * (event["pid"].get<int>() + 1));
    EXPECT_GE(event["args"]["step"].get<int>(), 0);
  }
  EXPECT_EQ(copies, 2 * 4);
}

}  // namespace
}  // namespace simtest
}  // namespace zl
