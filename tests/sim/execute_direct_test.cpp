// execute_direct_test.cpp — the simulator's direct path (sim/execute.cpp) on collectives big
// enough to be tiled and split over threads, with odd counts, in and out of place, against
// rank-order loops written out here; and overlapping buffers that must take the staged path.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "sim_world.hpp"

namespace zl {
namespace {

// Odd, not a multiple of the 32 KiB tile, and big enough to use two threads.
constexpr std::size_t kCountElems = 1'500'007;

// Values of mixed magnitude, so a different summation order would change the bits.
std::vector<float> rank_values(std::size_t rank, std::size_t elems) {
  std::vector<float> values(elems);
  for (std::size_t i = 0; i < elems; ++i) {
    const auto x = static_cast<float>((i * 7919 + rank * 104729) % 10007);
    values[i] = (i + rank) % 5 == 0 ? x * 1e6f : x * 1e-3f - 3.0f;
  }
  return values;
}

// Element i of rank 0's + rank 1's + ... in that order, then one division for Avg.
std::vector<float> rank_order(const std::vector<std::vector<float>>& inputs, std::size_t offset,
                              std::size_t elems, bool avg) {
  std::vector<float> out(elems);
  for (std::size_t i = 0; i < elems; ++i) {
    float acc = inputs[0][offset + i];
    for (std::size_t r = 1; r < inputs.size(); ++r) acc = acc + inputs[r][offset + i];
    out[i] = avg ? acc / static_cast<float>(inputs.size()) : acc;
  }
  return out;
}

// "" when equal bit for bit, else the first differing element.
std::string first_difference(const float* actual, const std::vector<float>& expected) {
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (std::memcmp(&actual[i], &expected[i], sizeof(float)) != 0) {
      return "element " + std::to_string(i) + ": " + std::to_string(actual[i]) + " vs expected " +
             std::to_string(expected[i]);
    }
  }
  return "";
}

class SimDirect : public ::testing::TestWithParam<int> {};

TEST_P(SimDirect, LargeAllReduceSumsInRankOrder) {
  const auto world = static_cast<std::size_t>(GetParam());
  std::vector<std::vector<float>> inputs;
  for (std::size_t r = 0; r < world; ++r) inputs.push_back(rank_values(r, kCountElems));
  auto data = inputs;
  SimWorld(GetParam()).run([&](Comm& comm) {
    comm.all_reduce(data[static_cast<std::size_t>(comm.rank())].data(), kCountElems, DType::F32,
                    ReduceOp::Avg);
  });
  const auto expected = rank_order(inputs, 0, kCountElems, /*avg=*/true);
  for (std::size_t r = 0; r < world; ++r) {
    EXPECT_EQ(first_difference(data[r].data(), expected), "") << "rank " << r;
  }
}

TEST_P(SimDirect, LargeReduceScatterInAndOutOfPlace) {
  const auto world = static_cast<std::size_t>(GetParam());
  std::vector<std::vector<float>> inputs;
  for (std::size_t r = 0; r < world; ++r) inputs.push_back(rank_values(r, world * kCountElems));
  auto in_place = inputs;
  std::vector<std::vector<float>> out(world, std::vector<float>(kCountElems));
  SimWorld(GetParam()).run([&](Comm& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    comm.reduce_scatter(inputs[r].data(), out[r].data(), kCountElems, DType::F32, ReduceOp::Sum);
    // NCCL's in-place form: recv = send + rank * recv_count
    comm.reduce_scatter(in_place[r].data(), in_place[r].data() + r * kCountElems, kCountElems,
                        DType::F32, ReduceOp::Sum);
  });
  for (std::size_t r = 0; r < world; ++r) {
    const auto expected = rank_order(inputs, r * kCountElems, kCountElems, /*avg=*/false);
    EXPECT_EQ(first_difference(out[r].data(), expected), "") << "rank " << r;
    EXPECT_EQ(first_difference(in_place[r].data() + r * kCountElems, expected), "")
        << "in place, rank " << r;
  }
}

TEST_P(SimDirect, LargeAllGatherAndBroadcastMoveBytesExactly) {
  const auto world = static_cast<std::size_t>(GetParam());
  std::vector<std::vector<float>> sends;
  for (std::size_t r = 0; r < world; ++r) sends.push_back(rank_values(r, kCountElems));
  std::vector<std::vector<float>> gathered(world, std::vector<float>(world * kCountElems));
  std::vector<std::vector<float>> in_place(world, std::vector<float>(world * kCountElems));
  auto broadcast = sends;
  SimWorld(GetParam()).run([&](Comm& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    comm.all_gather(sends[r].data(), gathered[r].data(), kCountElems, DType::F32);
    float* own_block = in_place[r].data() + r * kCountElems;
    std::memcpy(own_block, sends[r].data(), kCountElems * sizeof(float));
    comm.all_gather(own_block, in_place[r].data(), kCountElems, DType::F32);
    comm.broadcast(broadcast[r].data(), kCountElems, DType::F32, comm.size() - 1);
  });
  for (std::size_t r = 0; r < world; ++r) {
    for (std::size_t b = 0; b < world; ++b) {
      EXPECT_EQ(first_difference(gathered[r].data() + b * kCountElems, sends[b]), "")
          << "rank " << r << " block " << b;
      EXPECT_EQ(first_difference(in_place[r].data() + b * kCountElems, sends[b]), "")
          << "in place, rank " << r << " block " << b;
    }
    EXPECT_EQ(first_difference(broadcast[r].data(), sends[world - 1]), "") << "rank " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Worlds, SimDirect, ::testing::Values(2, 3, 5));

// Rank 0 receives into its own send's block 1, which the reduction of block 1 still reads: not
// an in-place form, so the sim stages every result before writing any.
TEST(SimDirectOverlap, RecvOverAnotherBlockOfSendIsStaged) {
  constexpr std::size_t kElems = 3'000'001;
  std::vector<std::vector<float>> inputs{rank_values(0, 2 * kElems), rank_values(1, 2 * kElems)};
  auto sends = inputs;
  std::vector<float> recv1(kElems);
  SimWorld(2).run([&](Comm& comm) {
    float* recv = comm.rank() == 0 ? sends[0].data() + kElems : recv1.data();
    comm.reduce_scatter(sends[static_cast<std::size_t>(comm.rank())].data(), recv, kElems,
                        DType::F32, ReduceOp::Sum);
  });
  EXPECT_EQ(first_difference(sends[0].data() + kElems, rank_order(inputs, 0, kElems, false)), "");
  EXPECT_EQ(first_difference(recv1.data(), rank_order(inputs, kElems, kElems, false)), "");
}

}  // namespace
}  // namespace zl
