// sim_world_test.cpp — SimWorld basics: world-size checks, ranks and sizes, and a world of one
// rank, where every collective returns its input and moves no bytes.
#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "sim_test_support.hpp"

namespace zl::simtest {
namespace {

TEST(SimWorld, rejects_world_size_below_one) {
  try {
    SimWorld sim(0);
    FAIL() << "SimWorld(0) did not throw";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "world size 0 is invalid: use 1 or more ranks");
  }
  EXPECT_THROW(SimWorld(-3), Error);
  EXPECT_THROW(SimWorld(2, SimOptions{.timeout = std::chrono::milliseconds(0)}), Error);
}

TEST(SimWorld, longest_timeout_does_not_overflow_the_clock) {
  SimWorld sim(2, SimOptions{.timeout = std::chrono::milliseconds::max()});
  sim.run([](Comm& comm) { comm.barrier(); });
  EXPECT_EQ(sim.traffic(1).calls(CollectiveKind::Barrier), 1);
}

TEST(SimWorld, each_rank_runs_on_its_own_thread) {
  SimWorld sim(8);
  ASSERT_EQ(sim.size(), 8);
  std::vector<int> ranks(8, -1);
  std::vector<int> sizes(8, -1);
  std::vector<std::thread::id> threads(8);
  sim.run([&](Comm& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    ranks[r] = comm.rank();
    sizes[r] = comm.size();
    threads[r] = std::this_thread::get_id();
  });
  for (int r = 0; r < 8; ++r) {
    EXPECT_EQ(ranks[static_cast<std::size_t>(r)], r);
    EXPECT_EQ(sizes[static_cast<std::size_t>(r)], 8);
  }
  EXPECT_EQ(std::set<std::thread::id>(threads.begin(), threads.end()).size(), 8U);
}

TEST(SimWorld, world_of_one_runs_every_collective) {
  SimWorld sim(1);
  const std::vector<float> input = {1.5F, -2.0F, 3.25F, 0.0F};
  std::vector<std::vector<float>> results;
  sim.run([&](Comm& comm) {
    EXPECT_EQ(comm.rank(), 0);
    EXPECT_EQ(comm.size(), 1);
    for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
      auto data = input;
      comm.all_reduce(data.data(), data.size(), DType::F32, op);
      results.push_back(data);
    }
    std::vector<float> shard(input.size());
    comm.reduce_scatter(input.data(), shard.data(), input.size(), DType::F32, ReduceOp::Sum);
    results.push_back(shard);
    std::vector<float> gathered(input.size());
    comm.all_gather(input.data(), gathered.data(), input.size(), DType::F32);
    results.push_back(gathered);
    auto data = input;
    comm.broadcast(data.data(), data.size(), DType::F32, 0);
    results.push_back(data);
    comm.barrier();
  });
  ASSERT_EQ(results.size(), 6U);
  for (const auto& result : results) EXPECT_EQ(result, input);
  EXPECT_EQ(sim.traffic(0).sent_bytes(), 0);
  EXPECT_EQ(sim.traffic(0).recv_bytes(), 0);
  EXPECT_EQ(sim.traffic(0).calls(CollectiveKind::AllReduce), 3);
  EXPECT_EQ(sim.traffic(0).calls(CollectiveKind::Barrier), 1);
}

TEST(SimWorld, zero_element_collectives_complete) {
  SimWorld sim(3);
  sim.run([](Comm& comm) {
    comm.all_reduce(nullptr, 0, DType::BF16, ReduceOp::Sum);
    comm.reduce_scatter(nullptr, nullptr, 0, DType::F16, ReduceOp::Max);
    comm.all_gather(nullptr, nullptr, 0, DType::I64);
    comm.broadcast(nullptr, 0, DType::F64, 2);
  });
  EXPECT_EQ(sim.traffic(1).calls(CollectiveKind::Broadcast), 1);
}

}  // namespace
}  // namespace zl::simtest
