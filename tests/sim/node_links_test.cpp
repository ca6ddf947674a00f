// node_links_test.cpp — the timeline's price of a collective in a world of nodes
// (plan_collective): one node is the one-link price it always was; several nodes take the cheaper
// of one ring through every rank and the hierarchical form, worked by hand for 4 nodes of 8 H100s.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "core/error.hpp"
#include "links.hpp"
#include "sim_test_support.hpp"

namespace zl::simtest {
namespace {

constexpr CollectiveKind kKinds[] = {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter,
                                     CollectiveKind::AllGather, CollectiveKind::Broadcast,
                                     CollectiveKind::Barrier};

// One node (kOneNode or G = W) is priced on the link inside it alone, as before nodes existed.
RC_GTEST_PROP(NodeLinks, prop_one_node_is_the_inside_links_price, ()) {
  const int world = *gen_world();
  const auto kind =
      *rc::gen::elementOf(std::vector<CollectiveKind>(std::begin(kKinds), std::end(kKinds)));
  const std::int64_t elems = *rc::gen::inRange<std::int64_t>(0, 1'000'000);
  const LinkPreset inside = link_preset("h100-nvlink");
  const double want = collective_ms(inside, wire_bytes(kind, elems, 4, world), world);
  for (const int gpus_per_node : {kOneNode, world}) {
    const CollectivePlan plan =
        plan_collective(inside, {.gpus_per_node = gpus_per_node}, kind, elems, 4, world);
    RC_ASSERT(plan.ms == want);
    RC_ASSERT(!plan.hierarchical);
  }
}

// More NICs a node never make a collective slower, and the plan is never slower than the ring.
RC_GTEST_PROP(NodeLinks, prop_more_nics_never_slow_a_collective, ()) {
  const int nodes = *rc::gen::inRange(2, 5);
  const int gpus = *rc::gen::inRange(1, 9);
  const auto kind =
      *rc::gen::elementOf(std::vector<CollectiveKind>(std::begin(kKinds), std::end(kKinds)));
  const std::int64_t elems = *rc::gen::inRange<std::int64_t>(0, 50'000'000);
  const int nics = *rc::gen::inRange(1, 9);
  const LinkPreset inside = link_preset("h100-nvlink");
  const NodeLinks fewer{.gpus_per_node = gpus, .nics_per_node = nics};
  const NodeLinks more{.gpus_per_node = gpus, .nics_per_node = nics + 1};
  const int world = nodes * gpus;
  RC_ASSERT(plan_collective(inside, more, kind, elems, 2, world).ms <=
            plan_collective(inside, fewer, kind, elems, 2, world).ms);
}

// 4 nodes of 8 H100s all-reduce 1 GB of fp32. With a 400 Gb/s NIC per GPU the ring runs at
// min(370, 8 x 45) = 360 GB/s, quicker than reducing inside, across and inside (the NICs are
// nearly as fast as NVLink); with one NIC a node the hierarchical form wins.
TEST(NodeLinks, FourNodesOfEightH100sAllReduceAGigabyte) {
  const LinkPreset inside = link_preset("h100-nvlink");
  const LinkPreset across = link_preset("ib-400g");
  const std::int64_t elems = 250'000'000;  // 1e9 bytes
  const double gb = 1e9;

  const CollectivePlan rails = plan_collective(inside, {.gpus_per_node = 8, .across = across},
                                               CollectiveKind::AllReduce, elems, 4, 32);
  const double ring_ms = 25e-3 + 2 * (gb - gb / 32) / 360e9 * 1e3;
  EXPECT_FALSE(rails.hierarchical);
  EXPECT_NEAR(rails.ms, ring_ms, 1e-9);
  EXPECT_NEAR(rails.ms, 5.41, 0.01);

  const CollectivePlan one_nic =
      plan_collective(inside, {.gpus_per_node = 8, .across = across, .nics_per_node = 1},
                      CollectiveKind::AllReduce, elems, 4, 32);
  const double inside_ms = 10e-3 + (gb - gb / 8) / 370e9 * 1e3;  // reduce_scatter of 8
  // Each GPU all-reduces its 1/8 among the 4 nodes on 1/8 of the node's one NIC.
  const double across_ms = 25e-3 + 2 * (gb / 8 - gb / 8 / 4) / (45e9 / 8) * 1e3;
  EXPECT_TRUE(one_nic.hierarchical);
  EXPECT_NEAR(one_nic.ms, inside_ms + across_ms + inside_ms, 1e-9);
  EXPECT_NEAR(one_nic.ms, 38.1, 0.1);
  const double one_nic_ring_ms = 25e-3 + 2 * (gb - gb / 32) / 45e9 * 1e3;
  EXPECT_LT(one_nic.ms, one_nic_ring_ms);  // 43.1 ms

  // reduce_scatter and all_gather are half of it: inside, then across (or across, then inside).
  const CollectivePlan gather =
      plan_collective(inside, {.gpus_per_node = 8, .across = across, .nics_per_node = 1},
                      CollectiveKind::AllGather, elems, 4, 32);
  EXPECT_TRUE(gather.hierarchical);
  EXPECT_NEAR(gather.ms, inside_ms + 25e-3 + (gb / 8 - gb / 8 / 4) / (45e9 / 8) * 1e3, 1e-9);
}

// One GPU a node is a ring across the nodes on their one NIC each: the flat --link ib-400g price.
TEST(NodeLinks, OneGpuANodeIsARingOnTheNics) {
  const LinkPreset across = link_preset("ib-400g");
  for (const CollectiveKind kind : kKinds) {
    const std::int64_t bytes = wire_bytes(kind, 1'000'000, 2, 6);
    const CollectivePlan plan = plan_collective(
        link_preset("h100-nvlink"), {.gpus_per_node = 1, .across = across}, kind, 1'000'000, 2, 6);
    EXPECT_EQ(plan.ms, collective_ms(across, bytes, 6)) << collective_name(kind);
    EXPECT_FALSE(plan.hierarchical);
  }
}

TEST(NodeLinks, ANodeLayoutThatDoesNotFitIsRefused) {
  const LinkPreset inside = link_preset("h100-nvlink");
  EXPECT_THROW(plan_collective(inside, {.gpus_per_node = 4}, CollectiveKind::AllReduce, 8, 4, 6),
               Error);
  EXPECT_THROW(plan_collective(inside, {.gpus_per_node = 2, .nics_per_node = -1},
                               CollectiveKind::AllReduce, 8, 4, 6),
               Error);
}

}  // namespace
}  // namespace zl::simtest
