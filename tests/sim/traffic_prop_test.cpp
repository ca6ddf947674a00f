// traffic_prop_test.cpp — the sim's traffic ledgers hold the ring volumes of traffic_ledger.hpp,
// checked against closed forms written here, with the calls counted per kind.
#include <gtest/gtest.h>  // before rapidcheck/gtest.h, which needs it
#include <rapidcheck/gtest.h>

#include "sim_test_support.hpp"

namespace zl::simtest {
namespace {

struct CallCounts {
  int all_reduce = 0;
  int reduce_scatter = 0;
  int all_gather = 0;
  int broadcast = 0;
  int barrier = 0;
};

// Makes each kind of call `counts` times on `block_elems`-element blocks (full buffers of W
// blocks).
SimWorld run_calls(int world, DType dtype, std::size_t block_elems, int root, CallCounts counts) {
  SimWorld sim(world);
  sim.run([&](Comm& comm) {
    const std::size_t elems = block_elems * static_cast<std::size_t>(world);
    Bytes full(elems * elem_bytes(dtype));
    Bytes block(block_elems * elem_bytes(dtype));
    for (int i = 0; i < counts.all_reduce; ++i)
      comm.all_reduce(full.data(), elems, dtype, ReduceOp::Sum);
    for (int i = 0; i < counts.reduce_scatter; ++i) {
      comm.reduce_scatter(full.data(), block.data(), block_elems, dtype, ReduceOp::Sum);
    }
    for (int i = 0; i < counts.all_gather; ++i)
      comm.all_gather(block.data(), full.data(), block_elems, dtype);
    for (int i = 0; i < counts.broadcast; ++i) comm.broadcast(full.data(), elems, dtype, root);
    for (int i = 0; i < counts.barrier; ++i) comm.barrier();
  });
  return sim;
}

rc::Gen<CallCounts> gen_counts() {
  return rc::gen::apply(
      [](int ar, int rs, int ag, int bc, int bar) {
        return CallCounts{ar, rs, ag, bc, bar};
      },
      rc::gen::inRange(0, 4), rc::gen::inRange(0, 4), rc::gen::inRange(0, 4),
      rc::gen::inRange(0, 4), rc::gen::inRange(0, 4));
}

RC_GTEST_PROP(SimTraffic, prop_traffic_equals_ring_volumes, ()) {
  const int world = *gen_world();
  const DType dtype = *gen_float_dtype();
  const auto block_elems = *rc::gen::inRange<std::size_t>(0, 9);
  const int root = *rc::gen::inRange(0, world);
  const CallCounts counts = *gen_counts();

  const SimWorld sim = run_calls(world, dtype, block_elems, root, counts);
  // S = bytes of the full buffer, W blocks. Ring volumes (ZeRO paper, NCCL's ring):
  //   all_reduce 2 (W-1)/W S; reduce_scatter and all_gather (W-1)/W S, sent and received alike;
  //   broadcast is a chain from the root: all but the last send S, all but the root receive S.
  const auto w = static_cast<std::int64_t>(world);
  const auto s_bytes = w * static_cast<std::int64_t>(block_elems * elem_bytes(dtype));
  const std::int64_t ring_pass_bytes = (w - 1) * s_bytes / w;
  for (int r = 0; r < world; ++r) {
    const TrafficLedger& ledger = sim.traffic(r);
    const bool last_in_chain = r == (root + world - 1) % world;
    RC_ASSERT(ledger.sent_bytes(CollectiveKind::AllReduce) ==
              counts.all_reduce * 2 * ring_pass_bytes);
    RC_ASSERT(ledger.recv_bytes(CollectiveKind::AllReduce) ==
              counts.all_reduce * 2 * ring_pass_bytes);
    RC_ASSERT(ledger.sent_bytes(CollectiveKind::ReduceScatter) ==
              counts.reduce_scatter * ring_pass_bytes);
    RC_ASSERT(ledger.recv_bytes(CollectiveKind::ReduceScatter) ==
              counts.reduce_scatter * ring_pass_bytes);
    RC_ASSERT(ledger.sent_bytes(CollectiveKind::AllGather) == counts.all_gather * ring_pass_bytes);
    RC_ASSERT(ledger.recv_bytes(CollectiveKind::AllGather) == counts.all_gather * ring_pass_bytes);
    RC_ASSERT(ledger.sent_bytes(CollectiveKind::Broadcast) ==
              (last_in_chain ? 0 : counts.broadcast * s_bytes));
    RC_ASSERT(ledger.recv_bytes(CollectiveKind::Broadcast) ==
              (r == root ? 0 : counts.broadcast * s_bytes));
    RC_ASSERT(ledger.sent_bytes(CollectiveKind::Barrier) == 0);
    RC_ASSERT(ledger.calls(CollectiveKind::AllReduce) == counts.all_reduce);
    RC_ASSERT(ledger.calls(CollectiveKind::ReduceScatter) == counts.reduce_scatter);
    RC_ASSERT(ledger.calls(CollectiveKind::AllGather) == counts.all_gather);
    RC_ASSERT(ledger.calls(CollectiveKind::Broadcast) == counts.broadcast);
    RC_ASSERT(ledger.calls(CollectiveKind::Barrier) == counts.barrier);
  }
}

// For any count, divisible by W or not, the ranks together send what they receive, and one ring
// pass moves (W-1) S in total: every byte leaves each rank but the one that owns its chunk.
RC_GTEST_PROP(SimTraffic, prop_ring_totals_hold_for_any_count, ()) {
  const int world = *gen_world();
  const auto elems = *rc::gen::inRange<std::size_t>(0, 40);
  SimWorld sim(world);
  sim.run([&](Comm& comm) {
    std::vector<float> data(elems);
    comm.all_reduce(data.data(), elems, DType::F32, ReduceOp::Sum);
  });
  const auto s_bytes = static_cast<std::int64_t>(elems * sizeof(float));
  std::int64_t sent_bytes = 0;
  std::int64_t recv_bytes = 0;
  for (int r = 0; r < world; ++r) {
    sent_bytes += sim.traffic(r).sent_bytes();
    recv_bytes += sim.traffic(r).recv_bytes();
  }
  RC_ASSERT(sent_bytes == 2 * (world - 1) * s_bytes);
  RC_ASSERT(recv_bytes == 2 * (world - 1) * s_bytes);
}

TEST(SimTraffic, each_run_starts_from_empty_ledgers) {
  SimWorld sim(4);
  for (int r = 0; r < sim.size(); ++r) EXPECT_EQ(sim.traffic(r).calls(CollectiveKind::Barrier), 0);
  const auto body = [](Comm& comm) {
    std::vector<float> data(8);
    comm.all_reduce(data.data(), data.size(), DType::F32, ReduceOp::Sum);
    comm.barrier();
  };
  sim.run(body);
  sim.run(body);
  for (int r = 0; r < sim.size(); ++r) {
    EXPECT_EQ(sim.traffic(r).calls(CollectiveKind::AllReduce), 1);
    EXPECT_EQ(sim.traffic(r).calls(CollectiveKind::Barrier), 1);
    EXPECT_EQ(sim.traffic(r).sent_bytes(), 2 * 3 * 32 / 4);  // 2 (W-1)/W S, S = 32 bytes
  }
}

}  // namespace
}  // namespace zl::simtest
