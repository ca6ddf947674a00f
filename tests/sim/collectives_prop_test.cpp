// collectives_prop_test.cpp — properties of the sim's collectives: all_reduce is bitwise
// reduce_scatter + all_gather, sums run in rank order, bytes move exactly (all_to_all too, with
// its ledger), avg is sum then one division, max propagates NaN. Worlds of 1..8 ranks, small
// counts, so failures shrink small; reduce_rank_order itself is also checked on counts that span
// its 1024-element tiles.
#include <gtest/gtest.h>  // before rapidcheck/gtest.h, which needs it
#include <rapidcheck/gtest.h>

#include <algorithm>

#include "comm/reduce.hpp"
#include "sim_test_support.hpp"

namespace zl::simtest {
namespace {

// Every rank all_reduces its own copy of `inputs[rank]`; returns the ranks' results.
std::vector<Bytes> sim_all_reduce(std::vector<Bytes> data, DType dtype, ReduceOp op) {
  const std::size_t elems = data.front().size() / elem_bytes(dtype);
  SimWorld(static_cast<int>(data.size())).run([&](Comm& comm) {
    comm.all_reduce(data[static_cast<std::size_t>(comm.rank())].data(), elems, dtype, op);
  });
  return data;
}

RC_GTEST_PROP(SimCollectives, prop_all_reduce_equals_reduce_scatter_then_all_gather, ()) {
  const int world = *gen_world();
  const DType dtype = *gen_float_dtype();
  const ReduceOp op = *gen_op();
  const auto block_elems = *rc::gen::inRange<std::size_t>(0, 9);
  const std::size_t elems = block_elems * static_cast<std::size_t>(world);
  const auto inputs = encode(dtype, *gen_rank_values(dtype, world, elems));

  auto reduced = inputs;
  std::vector<Bytes> gathered(inputs.size(), Bytes(inputs.front().size()));
  SimWorld(world).run([&](Comm& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    comm.all_reduce(reduced[r].data(), elems, dtype, op);
    Bytes shard(block_elems * elem_bytes(dtype));
    comm.reduce_scatter(inputs[r].data(), shard.data(), block_elems, dtype, op);
    comm.all_gather(shard.data(), gathered[r].data(), block_elems, dtype);
  });
  for (std::size_t r = 0; r < inputs.size(); ++r) {
    RC_ASSERT(first_difference(dtype, gathered[r], reduced[r]) == "");
    RC_ASSERT(first_difference(dtype, reduced[r], reduced[0]) == "");
  }
}

RC_GTEST_PROP(SimCollectives, prop_in_place_reduce_scatter_matches_out_of_place, ()) {
  const int world = *gen_world();
  const DType dtype = *gen_float_dtype();
  const ReduceOp op = *gen_op();
  const auto block_elems = *rc::gen::inRange<std::size_t>(0, 9);
  const auto inputs =
      encode(dtype, *gen_rank_values(dtype, world, block_elems * static_cast<std::size_t>(world)));

  auto in_place = inputs;  // NCCL's in-place form: recv = send + rank * recv_count
  std::vector<Bytes> shards(inputs.size(), Bytes(block_elems * elem_bytes(dtype)));
  SimWorld(world).run([&](Comm& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    comm.reduce_scatter(inputs[r].data(), shards[r].data(), block_elems, dtype, op);
    std::uint8_t* own_block = in_place[r].data() + r * shards[r].size();
    comm.reduce_scatter(in_place[r].data(), own_block, block_elems, dtype, op);
  });
  for (std::size_t r = 0; r < inputs.size(); ++r) {
    const auto offset = static_cast<std::ptrdiff_t>(r * shards[r].size());
    const Bytes own_block(
        in_place[r].begin() + offset,
        in_place[r].begin() + offset + static_cast<std::ptrdiff_t>(shards[r].size()));
    RC_ASSERT(first_difference(dtype, own_block, shards[r]) == "");
  }
}

RC_GTEST_PROP(SimCollectives, prop_sum_is_rank_ordered, ()) {
  const int world = *gen_world();
  const DType dtype = *gen_float_dtype();
  const auto elems = *rc::gen::inRange<std::size_t>(0, 17);
  const auto inputs = encode(dtype, *gen_rank_values(dtype, world, elems));

  const Bytes want = rank_order_sum(dtype, inputs, false);
  for (const auto& got : sim_all_reduce(inputs, dtype, ReduceOp::Sum)) {
    RC_ASSERT(first_difference(dtype, got, want) == "");
  }
}

// The order is observable: in fp32, (1e8 + -1e8) + 1 = 1 but (1 + -1e8) + 1e8 = 0, because
// 1 - 1e8 rounds to -1e8. A sim that summed in any other order would fail prop_sum_is_rank_ordered.
TEST(SimCollectives, sum_order_is_observable) {
  const std::vector<float> values = {1e8F, -1e8F, 1.0F};
  std::vector<Bytes> inputs;
  for (const float value : values) {
    Bytes buffer(sizeof value);
    std::memcpy(buffer.data(), &value, sizeof value);
    inputs.push_back(buffer);
  }
  const float left_to_right = (values[0] + values[1]) + values[2];
  const float right_to_left = (values[2] + values[1]) + values[0];
  ASSERT_EQ(left_to_right, 1.0F);
  ASSERT_EQ(right_to_left, 0.0F);
  for (const auto& got : sim_all_reduce(inputs, DType::F32, ReduceOp::Sum)) {
    EXPECT_EQ(value_at(DType::F32, got, 0), 1.0);
    EXPECT_EQ(first_difference(DType::F32, got, rank_order_sum(DType::F32, inputs, false)), "");
  }
}

RC_GTEST_PROP(SimCollectives, prop_all_gather_moves_bytes_exactly, (bool in_place)) {
  const int world = *gen_world();
  const DType dtype = *gen_any_dtype();
  const auto block_bytes = *rc::gen::inRange<std::size_t>(0, 9) * elem_bytes(dtype);
  const auto sends = *rc::gen::container<std::vector<Bytes>>(static_cast<std::size_t>(world),
                                                             gen_raw_bytes(block_bytes));
  // In place (as NCCL allows): rank r's send is block r of its recv; the other blocks are stale.
  auto recvs = *rc::gen::container<std::vector<Bytes>>(static_cast<std::size_t>(world),
                                                       gen_raw_bytes(block_bytes * sends.size()));
  SimWorld(world).run([&](Comm& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    std::uint8_t* own_block = recvs[r].data() + r * block_bytes;
    if (in_place && block_bytes > 0) std::memcpy(own_block, sends[r].data(), block_bytes);
    const void* send = in_place ? own_block : sends[r].data();
    comm.all_gather(send, recvs[r].data(), block_bytes / elem_bytes(dtype), dtype);
  });
  Bytes want;
  for (const auto& send : sends) want.insert(want.end(), send.begin(), send.end());
  for (const auto& recv : recvs) RC_ASSERT(recv == want);
}

// Block b of rank r's recv is block r of rank b's send; each rank sends and receives every block
// but its own, and the ledger says so.
RC_GTEST_PROP(SimCollectives, prop_all_to_all_moves_bytes_exactly, ()) {
  const int world = *gen_world();
  const DType dtype = *gen_any_dtype();
  const auto block_bytes = *rc::gen::inRange<std::size_t>(0, 9) * elem_bytes(dtype);
  const auto w = static_cast<std::size_t>(world);
  const auto sends = *rc::gen::container<std::vector<Bytes>>(w, gen_raw_bytes(block_bytes * w));
  std::vector<Bytes> recvs(w, Bytes(block_bytes * w));
  SimWorld sim(world);
  sim.run([&](Comm& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    comm.all_to_all(sends[r].data(), recvs[r].data(), block_bytes / elem_bytes(dtype), dtype);
  });
  for (std::size_t r = 0; r < w; ++r) {
    Bytes want;
    for (std::size_t b = 0; b < w; ++b) {
      want.insert(want.end(), sends[b].begin() + static_cast<std::ptrdiff_t>(r * block_bytes),
                  sends[b].begin() + static_cast<std::ptrdiff_t>((r + 1) * block_bytes));
    }
    RC_ASSERT(recvs[r] == want);
    const TrafficLedger& ledger = sim.traffic(static_cast<int>(r));
    const auto others_bytes = static_cast<std::int64_t>((w - 1) * block_bytes);
    RC_ASSERT(ledger.sent_bytes(CollectiveKind::AllToAll) == others_bytes);
    RC_ASSERT(ledger.recv_bytes(CollectiveKind::AllToAll) == others_bytes);
    RC_ASSERT(ledger.calls(CollectiveKind::AllToAll) == 1);
  }
}

RC_GTEST_PROP(SimCollectives, prop_broadcast_moves_bytes_exactly, ()) {
  const int world = *gen_world();
  const DType dtype = *gen_any_dtype();
  const int root = *rc::gen::inRange(0, world);
  const auto size_bytes = *rc::gen::inRange<std::size_t>(0, 17) * elem_bytes(dtype);
  auto data = *rc::gen::container<std::vector<Bytes>>(static_cast<std::size_t>(world),
                                                      gen_raw_bytes(size_bytes));
  const Bytes want = data[static_cast<std::size_t>(root)];
  SimWorld(world).run([&](Comm& comm) {
    comm.broadcast(data[static_cast<std::size_t>(comm.rank())].data(),
                   size_bytes / elem_bytes(dtype), dtype, root);
  });
  for (const auto& got : data) RC_ASSERT(got == want);
}

// Avg is the rank-order sum, then one division by W: for fp32 and fp64 exactly the sim's own Sum
// result divided by W; for bf16 and fp16 the float accumulator divided by W, rounded once.
RC_GTEST_PROP(SimCollectives, prop_avg_is_sum_then_one_division, ()) {
  const int world = *gen_world();
  const DType dtype = *gen_float_dtype();
  const auto elems = *rc::gen::inRange<std::size_t>(0, 17);
  const auto inputs = encode(dtype, *gen_rank_values(dtype, world, elems));

  Bytes want = rank_order_sum(dtype, inputs, true);
  if (dtype == DType::F32 || dtype == DType::F64) {
    const Bytes sum = sim_all_reduce(inputs, dtype, ReduceOp::Sum).front();
    for (std::size_t i = 0; i < elems; ++i) {
      const double value = value_at(dtype, sum, i);
      put(dtype, want, i,
          dtype == DType::F32
              ? static_cast<double>(static_cast<float>(value) / static_cast<float>(world))
              : value / world);
    }
  }
  for (const auto& got : sim_all_reduce(inputs, dtype, ReduceOp::Avg)) {
    RC_ASSERT(first_difference(dtype, got, want) == "");
  }
}

RC_GTEST_PROP(SimCollectives, prop_max_propagates_nan, ()) {
  const int world = *gen_world();
  const DType dtype = *gen_float_dtype();
  const auto elems = *rc::gen::inRange<std::size_t>(1, 17);
  auto inputs = encode(dtype, *gen_rank_values(dtype, world, elems));
  const int nan_rank = *rc::gen::inRange(0, world);
  const auto nan_elem = *rc::gen::inRange<std::size_t>(0, elems);
  put(dtype, inputs[static_cast<std::size_t>(nan_rank)], nan_elem, std::nan(""));

  for (const auto& got : sim_all_reduce(inputs, dtype, ReduceOp::Max)) {
    for (std::size_t i = 0; i < elems; ++i) {
      if (i == nan_elem) {
        RC_ASSERT(std::isnan(value_at(dtype, got, i)));
        continue;
      }
      double want = value_at(dtype, inputs[0], i);
      for (const auto& input : inputs) want = std::max(want, value_at(dtype, input, i));
      RC_ASSERT(value_at(dtype, got, i) == want);
    }
  }
}

// reduce_rank_order works tile by tile and adds up to three ranks per pass; counts around the
// tile edges and every world from 1 to 8 must still give the answer key's bits.
RC_GTEST_PROP(SimCollectives, prop_reduce_rank_order_is_the_answer_key_across_tiles, ()) {
  const int world = *gen_world();
  const DType dtype = *gen_float_dtype();
  const bool average = *rc::gen::arbitrary<bool>();
  const auto elems = *rc::gen::oneOf(rc::gen::inRange<std::size_t>(0, 8),
                                     rc::gen::inRange<std::size_t>(1020, 1030),
                                     rc::gen::inRange<std::size_t>(2045, 2052));
  const auto inputs = encode(dtype, *gen_rank_values(dtype, world, elems));

  std::vector<const void*> pointers;
  for (const auto& input : inputs) pointers.push_back(input.data());
  Bytes got(inputs.front().size());
  reduce_rank_order(pointers, got.data(), elems, dtype, average ? ReduceOp::Avg : ReduceOp::Sum);
  RC_ASSERT(first_difference(dtype, got, rank_order_sum(dtype, inputs, average)) == "");
}

// A world of nodes sums each node's ranks, rounds the node's sum to the dtype, and adds the node
// sums in node order: the answer key's two levels for every G that divides W, across the tiles.
RC_GTEST_PROP(SimCollectives, prop_reduce_by_node_is_the_two_level_answer_key, ()) {
  const int world = *gen_world();
  const int gpus_per_node = *gen_gpus_per_node(world);
  const DType dtype = *gen_float_dtype();
  const bool average = *rc::gen::arbitrary<bool>();
  const auto elems = *rc::gen::oneOf(rc::gen::inRange<std::size_t>(0, 8),
                                     rc::gen::inRange<std::size_t>(1020, 1030));
  const auto inputs = encode(dtype, *gen_rank_values(dtype, world, elems));
  RC_LOG() << "gpus per node " << gpus_per_node << "\n";

  std::vector<const void*> pointers;
  for (const auto& input : inputs) pointers.push_back(input.data());
  Bytes got(inputs.front().size());
  reduce_rank_order(pointers, got.data(), elems, dtype, average ? ReduceOp::Avg : ReduceOp::Sum,
                    gpus_per_node);
  RC_ASSERT(first_difference(dtype, got,
                             rank_order_sum(dtype, inputs, average,
                                            static_cast<std::size_t>(gpus_per_node))) == "");
  if (gpus_per_node == 1 || gpus_per_node == world) {  // one level: the flat order's bits
    RC_ASSERT(first_difference(dtype, got, rank_order_sum(dtype, inputs, average)) == "");
  }
}

// Two nodes of two sum 1e8 + 1 and -1e8 + 1 first (each rounds its 1 away in fp32), so the
// order is seen: the flat order gives 1, the two levels 0. A G that does not divide W is refused.
TEST(SimCollectives, ReduceByNodeAddsInAnotherOrderThanTheFlatOne) {
  const std::vector<float> values = {1e8f, 1.0f, -1e8f, 1.0f};
  std::vector<const void*> pointers;
  for (const float& value : values) pointers.push_back(&value);
  float flat = -1.0f;
  float by_node = -1.0f;
  reduce_rank_order(pointers, &flat, 1, DType::F32, ReduceOp::Sum);
  reduce_rank_order(pointers, &by_node, 1, DType::F32, ReduceOp::Sum, 2);
  EXPECT_EQ(flat, 1.0f);
  EXPECT_EQ(by_node, 0.0f);
  EXPECT_THROW(reduce_rank_order(pointers, &flat, 1, DType::F32, ReduceOp::Sum, 3), Error);
}

}  // namespace
}  // namespace zl::simtest
