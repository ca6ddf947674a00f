// timeline_test.cpp — the simulator's timeline: link costs are alpha + bytes / busbw exactly with
// the busiest rank's ring volume; the clocks keep their invariants (exposed <= comm, exposed ==
// comm with blocking calls only, spans sorted and disjoint per stream, a collective starting at
// the same time on every rank and after every rank issued it) on random programs and on live
// SimWorld runs with blocking and async calls; a replay of a live run's programs gives its times;
// the Chrome trace is valid JSON with one process per rank. Timing values are measurements, so
// the tests check structure and invariants, never a particular number of milliseconds.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <vector>

#include "sim_comm.hpp"
#include "sim_test_support.hpp"
#include "trace.hpp"

namespace zl {

// RapidCheck prints counterexamples with this: "all_gather" rather than <???>.
inline void showValue(CollectiveKind kind, std::ostream& os) {
  os << collective_name(kind);
}

namespace simtest {
namespace {

// A link with round numbers, so costs are easy to read in failures.
LinkPreset test_link() {
  return {.name = "test", .alpha_us = 100.0, .busbw_gbps = 1.0, .source = "tests"};
}

// The spans of one stream, in the order recorded.
std::vector<TimelineEvent> on_stream(const std::vector<TimelineEvent>& events, Stream stream) {
  std::vector<TimelineEvent> out;
  for (const auto& event : events) {
    if (event.stream == stream) out.push_back(event);
  }
  return out;
}

// "" when the spans of a stream start in order and never overlap (up to rounding of start +
// dur), else the first overlap.
std::string overlap(const std::vector<TimelineEvent>& events, const std::string& what) {
  for (std::size_t i = 1; i < events.size(); ++i) {
    const TimelineEvent& before = events[i - 1];
    const TimelineEvent& after = events[i];
    if (after.start_ms >= before.start_ms + before.dur_ms - 1e-9) continue;
    return fmt::format("{}: span {} ({} at {} ms) overlaps {} [{}, {})", what, i, after.name,
                       after.start_ms, before.name, before.start_ms,
                       before.start_ms + before.dur_ms);
  }
  return "";
}

// "" when a rank's timeline keeps the invariants that hold whatever the measured numbers, else
// the first one it breaks.
std::string broken_invariant(const TimelineRecord& rank, const LinkPreset& link, int world,
                             bool blocking_only) {
  const std::string what = fmt::format("rank {}", rank.rank);
  const auto comm = on_stream(rank.events, Stream::Comm);
  for (const auto& found : {overlap(on_stream(rank.events, Stream::Compute), what + " compute"),
                            overlap(comm, what + " comm")}) {
    if (!found.empty()) return found;
  }
  double comm_ms = 0.0;
  for (const auto& event : comm) {
    const double expected_ms = collective_ms(link, event.call.wire_bytes, world);
    if (event.dur_ms != expected_ms) {
      return fmt::format("{} call #{}: {} ms, not alpha + bytes / busbw = {} ms", what,
                         event.call.number, event.dur_ms, expected_ms);
    }
    if (event.start_ms < event.issue_ms) {
      return fmt::format("{} call #{} starts at {} ms before its issue at {} ms", what,
                         event.call.number, event.start_ms, event.issue_ms);
    }
    comm_ms += event.dur_ms;
  }
  double exposed_ms = 0.0;
  for (const auto& event : rank.events) exposed_ms += event.exposed_ms;
  if (exposed_ms > comm_ms + 1e-9) {
    return fmt::format("{}: exposed {} ms > comm {} ms", what, exposed_ms, comm_ms);
  }
  for (const auto& step : rank.steps) {
    const std::string where = fmt::format("{} step {}", what, step.step);
    if (step.exposed_comm_ms > step.comm_ms + 1e-9) {
      return fmt::format("{}: exposed {} ms > comm {} ms", where, step.exposed_comm_ms,
                         step.comm_ms);
    }
    if (step.step_ms < step.compute_ms + step.exposed_comm_ms - 1e-9) {
      return fmt::format("{}: {} ms < compute {} + exposed {}", where, step.step_ms,
                         step.compute_ms, step.exposed_comm_ms);
    }
    if (blocking_only && step.exposed_comm_ms != step.comm_ms) {
      return fmt::format("{}: blocking calls only, yet exposed {} ms != comm {} ms", where,
                         step.exposed_comm_ms, step.comm_ms);
    }
  }
  return "";
}

// "" when every rank's span of call k starts and ends at the same time, else the first that
// does not.
std::string misaligned(const std::vector<TimelineRecord>& ranks) {
  std::map<std::int64_t, std::pair<double, double>> first;  // call -> (start, dur) on rank 0
  for (const auto& rank : ranks) {
    for (const auto& event : on_stream(rank.events, Stream::Comm)) {
      const auto [it, inserted] =
          first.try_emplace(event.call.number, event.start_ms, event.dur_ms);
      if (inserted || (event.start_ms == it->second.first && event.dur_ms == it->second.second)) {
        continue;
      }
      return fmt::format("rank {} call #{} runs [{}, +{}) but rank 0 [{}, +{})", rank.rank,
                         event.call.number, event.start_ms, event.dur_ms, it->second.first,
                         it->second.second);
    }
  }
  return "";
}

TEST(SimTimelineLinks, presets_have_the_bandwidths_of_their_sources) {
  EXPECT_EQ(link_preset("h100-nvlink").busbw_gbps, 370.0);
  EXPECT_EQ(link_preset("a100-nvlink").busbw_gbps, 230.0);
  EXPECT_EQ(link_preset("ib-400g").busbw_gbps, 45.0);
  EXPECT_EQ(link_preset("pcie4").busbw_gbps, 25.0);
  for (const auto& link : link_presets()) {
    EXPECT_GT(link.alpha_us, 0.0) << link.name;
    EXPECT_FALSE(link.source.empty()) << link.name;
  }
  try {
    link_preset("carrier-pigeon");
    FAIL() << "an unknown link did not throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "link carrier-pigeon is unknown: use one of h100-nvlink, a100-nvlink, ib-400g, "
                 "pcie4");
  }
  EXPECT_TRUE(is_measured_cpu(device_preset("cpu")));
  EXPECT_EQ(achieved_gflops(device_preset("h100"), DType::BF16), 989.0 * 1e3 * 0.5);
  EXPECT_EQ(achieved_gflops(device_preset("a100"), DType::F32), 19.5 * 1e3 * 0.5);
  EXPECT_THROW(device_preset("tpu"), Error);
  EXPECT_THROW(achieved_gflops(device_preset("cpu"), DType::F32), Error);
}

RC_GTEST_PROP(SimTimelineLinks, prop_wire_bytes_is_the_busiest_ranks_ring_volume, ()) {
  const int world = *gen_world();
  const auto kind = *rc::gen::element(CollectiveKind::AllReduce, CollectiveKind::ReduceScatter,
                                      CollectiveKind::AllGather, CollectiveKind::Broadcast,
                                      CollectiveKind::Barrier);
  const std::int64_t elems = *rc::gen::inRange<std::int64_t>(0, 5000);
  const std::int64_t elem_bytes = *rc::gen::element<std::int64_t>(2, 4, 8);
  std::int64_t busiest = 0;
  for (int r = 0; r < world; ++r) {
    busiest = std::max(busiest, ring_volume(kind, elems, elem_bytes, r, world).sent_bytes);
  }
  RC_ASSERT(wire_bytes(kind, elems, elem_bytes, world) == busiest);
}

TEST(SimTimelineLinks, a_collective_costs_alpha_plus_bytes_over_bus_bandwidth) {
  const LinkPreset h100 = link_preset("h100-nvlink");
  // 8 ranks all-reduce 1 GB of fp32: the ring sends 2 * 7/8 GB per rank (nccl-tests' busbw).
  const std::int64_t elems = 250'000'000;
  const std::int64_t bytes = wire_bytes(CollectiveKind::AllReduce, elems, 4, 8);
  EXPECT_EQ(bytes, 2 * (elems * 4 - elems / 8 * 4));
  EXPECT_EQ(collective_ms(h100, bytes, 8), 10.0 / 1e3 + static_cast<double>(bytes) / 370e9 * 1e3);
  EXPECT_NEAR(collective_ms(h100, bytes, 8), 4.74, 0.01);  // 1.75 GB at 370 GB/s + 10 us
  EXPECT_EQ(collective_ms(h100, 0, 8), 0.01);              // a barrier: alpha only
  EXPECT_EQ(collective_ms(h100, bytes, 1), 0.0);           // one rank: no link
}

// ---- the clocks on random programs ----------------------------------------------------------

// One call of a random program: what every rank issues, and whether the oldest pending async
// call is waited right after it.
struct CallSpec {
  CollectiveKind kind;
  std::int64_t elems;
  bool async;
  bool wait_after;
};

// Random programs for `ranks` ranks: the same calls on every rank (some async, waited a few calls
// later or at the step's end), with random computation between them on each rank.
std::vector<std::vector<TimelineOp>> gen_programs(int ranks, bool blocking_only) {
  const int steps = *rc::gen::inRange(1, 3);
  const int calls = *rc::gen::inRange(1, 12);
  std::vector<std::vector<CallSpec>> specs(static_cast<std::size_t>(steps));
  for (auto& step : specs) {
    for (int c = 0; c < calls; ++c) {
      step.push_back({*rc::gen::element(CollectiveKind::AllReduce, CollectiveKind::ReduceScatter,
                                        CollectiveKind::AllGather),
                      *rc::gen::inRange<std::int64_t>(0, 400'000),
                      !blocking_only && *rc::gen::arbitrary<bool>(), *rc::gen::inRange(0, 3) == 0});
    }
  }
  std::vector<std::vector<TimelineOp>> programs(static_cast<std::size_t>(ranks));
  for (auto& program : programs) {
    std::int64_t number = 0;
    for (int step = 0; step < steps; ++step) {
      program.push_back({.kind = TimelineOp::Kind::BeginStep, .step = step});
      std::vector<std::int64_t> pending;
      for (const CallSpec& spec : specs[static_cast<std::size_t>(step)]) {
        program.push_back({.kind = TimelineOp::Kind::Compute,
                           .compute_ms = *rc::gen::inRange(0, 2000) / 1000.0,
                           .label = "compute"});
        const CallInfo call{.number = ++number,
                            .kind = spec.kind,
                            .buffer_elems = spec.elems,
                            .elem_bytes = 4,
                            .sent_bytes = 0,
                            .wire_bytes = wire_bytes(spec.kind, spec.elems, 4, ranks)};
        program.push_back({.kind = TimelineOp::Kind::Issue, .call = call, .async = spec.async});
        if (spec.async) pending.push_back(call.number);
        if (!pending.empty() && (!spec.async || spec.wait_after)) {
          program.push_back({.kind = TimelineOp::Kind::Wait, .call = {.number = pending.front()}});
          pending.erase(pending.begin());
        }
      }
      for (const auto left : pending) {
        program.push_back({.kind = TimelineOp::Kind::Wait, .call = {.number = left}});
      }
      program.push_back({.kind = TimelineOp::Kind::EndStep});
    }
  }
  return programs;
}

RC_GTEST_PROP(SimTimelineClocks, prop_replayed_programs_keep_the_invariants, ()) {
  const int ranks = *rc::gen::inRange(1, 5);
  const bool blocking_only = *rc::gen::arbitrary<bool>();
  const auto programs = gen_programs(ranks, blocking_only);
  const LinkPreset link = test_link();
  const auto records = replay(programs, link, host_link_preset(kDefaultHostLink),
                              disk_link_preset(kDefaultDiskLink), ranks, /*record_events=*/true);
  RC_ASSERT(records.size() == static_cast<std::size_t>(ranks));
  for (const auto& rank : records) {
    const std::string broken = broken_invariant(rank, link, ranks, blocking_only);
    if (!broken.empty()) RC_FAIL(broken);
  }
  const std::string apart = misaligned(records);
  if (!apart.empty()) RC_FAIL(apart);
}

TEST(SimTimelineClocks, an_async_call_hidden_by_compute_is_not_exposed) {
  RankClocks clocks(false, true);
  const CallInfo call{.number = 1, .kind = CollectiveKind::AllReduce, .wire_bytes = 1000};
  clocks.begin_step(0);
  clocks.compute(1.0, "forward");
  clocks.issue(call, /*async=*/true, 1.0, 2.0);  // comm [1, 3)
  clocks.compute(5.0, "backward");               // compute [1, 6): hides it
  clocks.wait(1);
  StepTimes step = clocks.end_step();
  EXPECT_EQ(step.comm_ms, 2.0);
  EXPECT_EQ(step.exposed_comm_ms, 0.0);
  EXPECT_EQ(step.step_ms, 6.0);

  clocks.begin_step(1);
  clocks.issue({.number = 2, .kind = CollectiveKind::AllReduce}, true, 6.0, 4.0);  // [6, 10)
  clocks.compute(1.5, "backward");                                                 // to 7.5
  clocks.wait(2);
  step = clocks.end_step();
  EXPECT_EQ(step.exposed_comm_ms, 2.5);  // the compute stream waits 7.5 .. 10
  EXPECT_EQ(step.step_ms, 4.0);
  EXPECT_THROW(clocks.wait(2), Error);   // waited already
  EXPECT_THROW(clocks.wait(99), Error);  // never issued
}

TEST(SimTimelineClocks, waiting_for_a_late_rank_is_not_exposed_comm) {
  RankClocks clocks(false, true);
  clocks.compute(1.0, "forward");
  // The collective cannot start before the slowest rank is ready at 5 ms.
  clocks.issue({.number = 1, .kind = CollectiveKind::AllGather}, false, 5.0, 0.5);
  EXPECT_EQ(clocks.compute_clock_ms(), 5.5);
  EXPECT_EQ(clocks.totals().exposed_comm_ms, 0.5);
  EXPECT_EQ(clocks.events().back().name, "wait all_gather");
  EXPECT_EQ(clocks.events().back().dur_ms, 4.5);
  EXPECT_THROW(clocks.issue({.number = 2}, false, 1.0, 0.5), Error);  // before it is ready
}

TEST(SimTimelineClocks, board_starts_a_call_at_the_latest_ready_time) {
  TimelineBoard board(3);
  board.publish(1, 2.0);
  board.publish(1, 7.5);
  board.publish(1, 0.5);
  EXPECT_EQ(board.start_ms(1), 7.5);
  EXPECT_EQ(board.start_ms(1), 7.5);
  EXPECT_EQ(board.start_ms(1), 7.5);
  EXPECT_THROW(board.start_ms(1), Error);  // freed after its three readers
  board.publish(2, 1.0);
  EXPECT_THROW(board.start_ms(2), Error);  // two ranks have not published
}

// ---- live runs on the simulator -------------------------------------------------------------

SimOptions recording(const LinkPreset& link) {
  return {.timeline = {
              .link = link, .compute_scale = 1.0, .record_program = true, .record_events = true}};
}

// Each rank: two steps of computation (rank r computes a little longer) and blocking collectives.
void blocking_steps(Comm& comm) {
  RankTimeline& timeline = *sim_timeline(comm);
  std::vector<float> data(4096, 1.0f), shard(1024);
  for (int step = 0; step < 2; ++step) {
    timeline.begin_step(step);
    burn_cpu_ms(0.5 + 0.5 * comm.rank());
    timeline.mark("forward");
    comm.all_reduce(data.data(), data.size(), DType::F32, ReduceOp::Sum);
    comm.reduce_scatter(data.data(), shard.data(), shard.size(), DType::F32, ReduceOp::Avg);
    comm.all_gather(shard.data(), data.data(), shard.size(), DType::F32);
    comm.barrier();
    timeline.end_step();
  }
}

TEST(SimTimelineLive, blocking_calls_expose_all_their_comm_and_start_together) {
  const LinkPreset link = test_link();
  SimWorld sim(4, recording(link));
  sim.run(blocking_steps);
  std::vector<TimelineRecord> ranks;
  for (int r = 0; r < 4; ++r) ranks.push_back(sim.timeline(r));
  for (const auto& rank : ranks) {
    ASSERT_EQ(rank.steps.size(), 2u);
    EXPECT_EQ(broken_invariant(rank, link, 4, /*blocking_only=*/true), "");
    const auto comm = on_stream(rank.events, Stream::Comm);
    ASSERT_EQ(comm.size(), 8u);
    // 16 KB all_reduce on 4 ranks: the ring sends 2 * 3/4 of it; 100 us + bytes / 1 GB/s.
    EXPECT_EQ(comm[0].call.wire_bytes, 2 * 3 * 4096);
    EXPECT_EQ(comm[0].dur_ms, 0.1 + 24576.0 / 1e9 * 1e3);
    EXPECT_EQ(comm[0].call.sent_bytes,
              sim.traffic(rank.rank).sent_bytes(CollectiveKind::AllReduce) / 2);
    EXPECT_EQ(comm[3].name, "barrier");
    EXPECT_EQ(comm[3].dur_ms, 0.1);
    EXPECT_GE(rank.steps[0].compute_ms, 0.5);
    EXPECT_EQ(rank.totals().comm_ms, rank.totals().exposed_comm_ms);
  }
  EXPECT_EQ(misaligned(ranks), "");
  // The slowest rank (3) sets every start: the others wait for it, which is not exposed comm.
  EXPECT_GT(ranks[0].steps[0].step_ms,
            ranks[0].steps[0].compute_ms + ranks[0].steps[0].exposed_comm_ms);
}

TEST(SimTimelineLive, an_async_call_overlaps_the_computation_before_its_wait) {
  const LinkPreset link = test_link();  // an all_reduce of 4 KB: ~0.1 ms
  SimWorld sim(2, recording(link));
  sim.run([](Comm& comm) {
    RankTimeline& timeline = *sim_timeline(comm);
    std::vector<float> grads(1024, 1.0f);
    timeline.begin_step(0);
    CommHandle handle =
        comm.all_reduce_async(grads.data(), grads.size(), DType::F32, ReduceOp::Avg);
    burn_cpu_ms(20.0);  // far longer than the all_reduce
    timeline.mark("backward");
    handle.wait();
    timeline.end_step();
  });
  for (int r = 0; r < 2; ++r) {
    const TimelineRecord& rank = sim.timeline(r);
    EXPECT_EQ(broken_invariant(rank, link, 2, /*blocking_only=*/false), "");
    const auto comm = on_stream(rank.events, Stream::Comm);
    ASSERT_EQ(comm.size(), 1u);
    EXPECT_TRUE(comm[0].async);
    EXPECT_GT(rank.steps[0].comm_ms, 0.0);
    EXPECT_EQ(rank.steps[0].exposed_comm_ms, 0.0) << "rank " << r;
  }
}

TEST(SimTimelineLive, a_lone_rank_has_no_link) {
  SimWorld one(1, recording(test_link()));
  one.run([](Comm& comm) {
    float x = 1.0f;
    comm.all_reduce(&x, 1, DType::F32, ReduceOp::Sum);
  });
  const auto comm = on_stream(one.timeline(0).events, Stream::Comm);
  ASSERT_EQ(comm.size(), 1u);
  EXPECT_EQ(comm[0].dur_ms, 0.0);
}

TEST(SimTimelineLive, replaying_the_recorded_programs_gives_the_recorded_times) {
  const LinkPreset link = link_preset("ib-400g");
  SimWorld sim(3, recording(link));
  sim.run(blocking_steps);
  std::vector<std::vector<TimelineOp>> programs;
  for (int r = 0; r < 3; ++r) programs.push_back(sim.timeline(r).program);
  const auto replayed = replay(programs, link, host_link_preset(kDefaultHostLink),
                               disk_link_preset(kDefaultDiskLink), 3, /*record_events=*/true);
  for (int r = 0; r < 3; ++r) {
    const auto& live = sim.timeline(r);
    ASSERT_EQ(replayed[r].steps.size(), live.steps.size());
    for (std::size_t s = 0; s < live.steps.size(); ++s) {
      EXPECT_EQ(replayed[r].steps[s].step_ms, live.steps[s].step_ms) << "rank " << r;
      EXPECT_EQ(replayed[r].steps[s].comm_ms, live.steps[s].comm_ms) << "rank " << r;
      EXPECT_EQ(replayed[r].steps[s].exposed_comm_ms, live.steps[s].exposed_comm_ms);
    }
    EXPECT_EQ(replayed[r].events.size(), live.events.size());
  }
}

TEST(SimTimelineTrace, is_json_with_one_process_per_rank_and_bytes_on_every_collective) {
  SimWorld sim(3, recording(test_link()));
  sim.run(blocking_steps);
  std::vector<TimelineRecord> ranks;
  for (int r = 0; r < 3; ++r) ranks.push_back(sim.timeline(r));
  const auto trace = nlohmann::json::parse(
      chrome_trace_json(ranks, {.engine = "test", .world = 3, .link = "test", .device = "cpu"}));
  EXPECT_EQ(trace["displayTimeUnit"], "ms");
  std::set<int> processes;
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> spans;
  int collectives = 0;
  for (const auto& event : trace["traceEvents"]) {
    const int pid = event["pid"];
    EXPECT_TRUE(pid >= 0 && pid < 3) << event.dump();
    if (event["ph"] == "M") {
      if (event["name"] == "process_name") processes.insert(pid);
      continue;
    }
    ASSERT_EQ(event["ph"], "X") << event.dump();
    const int tid = event["tid"];
    EXPECT_TRUE(tid == kStepTrack || tid == kComputeTrack || tid == kCommTrack);
    spans[{pid, tid}].emplace_back(event["ts"], event["dur"]);
    if (tid == kCommTrack) {
      ++collectives;
      EXPECT_TRUE(event["args"].contains("bytes")) << event.dump();
      EXPECT_GE(event["args"]["call"].get<int>(), 1);
    }
  }
  EXPECT_EQ(processes, (std::set<int>{0, 1, 2}));
  EXPECT_EQ(collectives, 3 * 8);
  for (const auto& [track, list] : spans) {
    for (std::size_t i = 1; i < list.size(); ++i) {
      EXPECT_GE(list[i].first, list[i - 1].first + list[i - 1].second - 1e-6)
          << "rank " << track.first << " track " << track.second << " span " << i;
    }
  }
}

}  // namespace
}  // namespace simtest
}  // namespace zl
