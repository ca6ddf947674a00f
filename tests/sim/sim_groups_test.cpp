// sim_groups_test.cpp — Comm::split on the simulator: a group's collectives give its ranks' answer
// key (rank order within the group) while the world's go on, groups split again, a rank that
// fails or returns ends its group's waits at once naming its world rank, a group's mismatch names
// the group, and a group's calls are counted in the rank's ledger and priced on the timeline for
// the ranks and nodes the group spans (and a replay, which cannot follow groups, refuses them).
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <chrono>
#include <map>
#include <memory>

#include "links.hpp"
#include "rendezvous.hpp"
#include "sim_comm.hpp"
#include "sim_test_support.hpp"

namespace zl::simtest {
namespace {

// The world ranks with each color, in rank order.
std::map<int, std::vector<int>> members_of(const std::vector<int>& colors) {
  std::map<int, std::vector<int>> members;
  for (int r = 0; r < static_cast<int>(colors.size()); ++r) members[colors[r]].push_back(r);
  return members;
}

// Every rank splits by a random color, all-reduces and all-gathers in its group, then all-reduces
// in the world: each result is the answer key over the ranks it should cover, in their order.
RC_GTEST_PROP(SimGroups, prop_a_groups_collectives_are_its_ranks_answer_key, ()) {
  const int world = *gen_world();
  const auto colors = *rc::gen::container<std::vector<int>>(static_cast<std::size_t>(world),
                                                            rc::gen::inRange(0, 3));
  const DType dtype = *gen_float_dtype();
  const bool average = *rc::gen::arbitrary<bool>();
  const auto elems = *rc::gen::inRange<std::size_t>(0, 40);
  const auto inputs = encode(dtype, *gen_rank_values(dtype, world, elems));
  const auto groups = members_of(colors);
  const ReduceOp op = average ? ReduceOp::Avg : ReduceOp::Sum;

  std::vector<Bytes> reduced(inputs), gathered(inputs.size()), world_reduced(inputs);
  SimWorld(world).run([&](Comm& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    const std::unique_ptr<Comm> group = comm.split(colors[r]);
    const auto& members = groups.at(colors[r]);
    RC_ASSERT(group->size() == static_cast<int>(members.size()));
    group->all_reduce(reduced[r].data(), elems, dtype, op);
    gathered[r].resize(members.size() * inputs[r].size());
    group->all_gather(inputs[r].data(), gathered[r].data(), elems, dtype);
    comm.all_reduce(world_reduced[r].data(), elems, dtype, op);
  });
  for (int r = 0; r < world; ++r) {
    const auto& members = groups.at(colors[static_cast<std::size_t>(r)]);
    std::vector<Bytes> group_inputs;
    Bytes concatenated;
    for (const int m : members) {
      group_inputs.push_back(inputs[static_cast<std::size_t>(m)]);
      concatenated.insert(concatenated.end(), inputs[static_cast<std::size_t>(m)].begin(),
                          inputs[static_cast<std::size_t>(m)].end());
    }
    RC_ASSERT(first_difference(dtype, reduced[static_cast<std::size_t>(r)],
                               rank_order_sum(dtype, group_inputs, average)) == "");
    RC_ASSERT(gathered[static_cast<std::size_t>(r)] == concatenated);
    RC_ASSERT(first_difference(dtype, world_reduced[static_cast<std::size_t>(r)],
                               rank_order_sum(dtype, inputs, average)) == "");
  }
}

// A group splits again: the halves of 8 ranks by parity give groups {0,2}, {1,3}, {4,6}, {5,7},
// and a broadcast from each small group's rank 1 reaches only that group.
TEST(SimGroups, GroupsSplitAgain) {
  std::vector<std::int64_t> got(8, -1);
  SimWorld(8).run([&](Comm& comm) {
    const std::unique_ptr<Comm> half = comm.split(comm.rank() / 4);
    const std::unique_ptr<Comm> pair = half->split(half->rank() % 2);
    EXPECT_EQ(pair->size(), 2);
    std::int64_t value = comm.rank();
    pair->broadcast(&value, 1, DType::I64, 1);
    got[static_cast<std::size_t>(comm.rank())] = value;
  });
  EXPECT_EQ(got, (std::vector<std::int64_t>{2, 3, 2, 3, 6, 7, 6, 7}));
}

// Groups {0,1} and {2,3}: a rank that throws, or returns, before its group's call ends its peer's
// wait at once (not at the timeout), and the error names the world ranks.
TEST(SimGroups, ARankThatLeavesEndsItsGroupsWaitsAtOnce) {
  SimWorld thrower(4, SimOptions{.timeout = std::chrono::seconds(60)});
  std::string error;
  const double seconds = seconds_taken([&] {
    error = run_error(thrower, [](Comm& comm) {
      const std::unique_ptr<Comm> group = comm.split(comm.rank() / 2);
      if (comm.rank() == 3) throw Error("disk full");
      float value = 1.0f;
      group->all_reduce(&value, 1, DType::F32, ReduceOp::Sum);
    });
  });
  EXPECT_LT(seconds, 10.0);
  EXPECT_NE(error.find("rank 3: disk full"), std::string::npos) << error;

  SimWorld returner(4, SimOptions{.timeout = std::chrono::seconds(60)});
  std::vector<std::string> messages(4);
  const double returned_seconds = seconds_taken([&] {
    error = run_error(returner, [&](Comm& comm) {
      const std::unique_ptr<Comm> group = comm.split(comm.rank() / 2);
      if (comm.rank() == 3) return;
      float value = 1.0f;
      try {
        group->all_reduce(&value, 1, DType::F32, ReduceOp::Sum);
      } catch (const Error& e) {
        messages[static_cast<std::size_t>(comm.rank())] = e.what();
        throw;
      }
    });
  });
  EXPECT_LT(returned_seconds, 10.0);
  EXPECT_EQ(messages[2],
            "rank 2 waits in call #1 of the group of ranks 2, 3 all_reduce(fp32, 1 elems, sum) but "
            "rank 3 returned after 0 collectives");
}

// A mismatch inside a group names the group and the world ranks.
TEST(SimGroups, AMismatchInAGroupNamesTheGroup) {
  SimWorld world(4);
  const std::string error = run_error(world, [](Comm& comm) {
    const std::unique_ptr<Comm> group = comm.split(comm.rank() / 2);
    std::vector<float> data(8);
    group->all_reduce(data.data(), comm.rank() == 3 ? 7 : 8, DType::F32, ReduceOp::Sum);
  });
  EXPECT_NE(error.find("collective mismatch at call #1 of the group of ranks 2, 3: rank 2 called "
                       "all_reduce(fp32, 8 elems, sum) but rank 3 called all_reduce(fp32, 7 "
                       "elems, sum)"),
            std::string::npos)
      << error;
}

// Two nodes of two joined by one NIC each: a group inside a node is priced on NVLink among its
// two ranks, a group across the nodes as a ring on half of each node's NIC (the other group uses
// the rest); both are counted in the rank's ledger, with the colors' all_gathers, and the replay
// gives every call the live start and duration.
TEST(SimGroups, GroupCallsArePricedForTheirRanksAndCountedInTheRanksLedger) {
  const LinkPreset inside = link_preset("h100-nvlink");
  const NodeLinks nodes{.gpus_per_node = 2, .across = link_preset("ib-400g"), .nics_per_node = 1};
  SimOptions options{
      .timeline = {.link = inside, .nodes = nodes, .record_program = true, .record_events = true},
      .gpus_per_node = 2};
  SimWorld world(4, options);
  constexpr std::size_t kElems = 1 << 20;
  world.run([&](Comm& comm) {
    std::vector<float> data(kElems, 1.0f);
    const std::unique_ptr<Comm> node = comm.split(comm.rank() / 2);
    const std::unique_ptr<Comm> across = comm.split(comm.rank() % 2);
    node->all_reduce(data.data(), kElems, DType::F32, ReduceOp::Sum);
    across->all_reduce(data.data(), kElems, DType::F32, ReduceOp::Sum);
    EXPECT_EQ(data[0], 4.0f);
    EXPECT_EQ(&node->traffic(), &comm.traffic());  // a group counts in its world's ledger
    EXPECT_EQ(&across->traffic(), &comm.traffic());
  });
  const std::int64_t wire = wire_bytes(CollectiveKind::AllReduce, kElems, 4, 2);
  const LinkPreset half_nic{.name = "", .alpha_us = 25.0, .busbw_gbps = 22.5, .source = ""};
  std::vector<double> durations;
  for (const auto& event : world.timeline(0).events) {
    if (event.stream == Stream::Comm && event.call.kind == CollectiveKind::AllReduce) {
      durations.push_back(event.dur_ms);
      EXPECT_EQ(event.call.group_ranks, 2);
    }
  }
  ASSERT_EQ(durations.size(), 2u);
  EXPECT_DOUBLE_EQ(durations[0], collective_ms(inside, wire, 2));
  EXPECT_DOUBLE_EQ(durations[1], collective_ms(half_nic, wire, 2));
  const TrafficLedger& ledger = world.traffic(0);
  EXPECT_EQ(ledger.calls(CollectiveKind::AllReduce), 2);
  EXPECT_EQ(ledger.calls(CollectiveKind::AllGather), 2);  // the two splits' colors
  // The replay prices each group's call for its ranks and starts it when the group's last rank
  // is ready: the live clocks, span by span.
  std::vector<std::vector<TimelineOp>> programs;
  for (int r = 0; r < 4; ++r) programs.push_back(world.timeline(r).program);
  const auto replayed = replay(programs, inside, host_link_preset(kDefaultHostLink),
                               disk_link_preset(kDefaultDiskLink), 4, true, nodes);
  for (int r = 0; r < 4; ++r) {
    const auto& live = world.timeline(r).events;
    const auto& again = replayed[static_cast<std::size_t>(r)].events;
    ASSERT_EQ(again.size(), live.size()) << "rank " << r;
    for (std::size_t e = 0; e < live.size(); ++e) {
      if (live[e].stream != Stream::Comm) continue;
      EXPECT_EQ(again[e].start_ms, live[e].start_ms) << "rank " << r << " span " << e;
      EXPECT_EQ(again[e].dur_ms, live[e].dur_ms) << "rank " << r << " span " << e;
    }
    std::vector<int> leaders;  // of the node's group, then of the group across the nodes
    for (const auto& event : live) {
      if (event.stream == Stream::Comm && event.call.kind == CollectiveKind::AllReduce) {
        leaders.push_back(event.call.group_leader);
      }
    }
    EXPECT_EQ(leaders, (std::vector<int>{r / 2 * 2, r % 2})) << "rank " << r;
  }
}

// A SimComm made without groups cannot split, and says so.
TEST(SimGroups, ACommWithoutGroupsCannotSplit) {
  Rendezvous rendezvous(1, std::chrono::seconds(1));
  SimComm comm(0, 1, rendezvous);
  EXPECT_THROW(comm.split(0), Error);
}

}  // namespace
}  // namespace zl::simtest
