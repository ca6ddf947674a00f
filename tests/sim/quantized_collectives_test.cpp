// quantized_collectives_test.cpp — ZeRO++'s quantized collectives on the simulator, in worlds of
// nodes: qwZ's gather gives every rank the same bits, each value within its shard block's bound;
// qgZ's two all_to_alls give the same bits run after run (whatever the threads' timing), each sum
// within the closed form of its blocks at both levels, and send exactly the quantized bytes: the
// pieces for the node's other ranks inside, one piece a node across.
#include "comm/quantized_collectives.hpp"

#include <gtest/gtest.h>  // before rapidcheck/gtest.h, which needs it
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "sim_test_support.hpp"

namespace zl::simtest {
namespace {

using Values = std::vector<float>;

rc::Gen<QuantBits> gen_bits() {
  return rc::gen::element(QuantBits::Int4, QuantBits::Int8);
}

rc::Gen<Values> gen_values(std::size_t elems) {
  return rc::gen::container<Values>(elems, rc::gen::map(rc::gen::inRange(-4000, 4001), [](int v) {
                                      return static_cast<float>(v) / 64.0f;
                                    }));
}

// The largest magnitude among elements [first, last) of `values`.
double amax_of(const Values& values, std::size_t first, std::size_t last) {
  double amax = 0.0;
  for (std::size_t i = first; i < last; ++i) amax = std::max(amax, std::fabs(double{values[i]}));
  return amax;
}

// Bound of element `i` of an array of `elems` quantized in blocks of `block`: its block's.
double element_bound(const Values& piece, std::size_t i, std::size_t block, QuantBits bits) {
  const std::size_t first = i / block * block;
  return quantization_error_bound(amax_of(piece, first, std::min(piece.size(), first + block)),
                                  bits);
}

RC_GTEST_PROP(QuantizedCollectives, prop_the_gather_gives_every_rank_each_shard_within_its_bound,
              ()) {
  const int world = *gen_world();
  const auto shard_elems = *rc::gen::inRange<std::size_t>(1, 40);
  const std::int64_t block = 2 * *rc::gen::inRange<std::int64_t>(1, 9);
  const QuantBits bits = *gen_bits();
  const auto shards = *rc::gen::container<std::vector<Values>>(static_cast<std::size_t>(world),
                                                               gen_values(shard_elems));
  std::vector<Values> full(shards.size(), Values(shard_elems * shards.size()));
  SimWorld sim(world);
  sim.run([&](Comm& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    quantized_all_gather(comm, shards[r], block, bits, [&](int q, std::span<const float> values) {
      std::ranges::copy(values, full[r].begin() + q * std::ssize(values));
    });
  });
  for (const Values& got : full) RC_ASSERT(got == full.front());
  for (std::size_t r = 0; r < shards.size(); ++r) {
    for (std::size_t i = 0; i < shard_elems; ++i) {
      const double error = std::fabs(double{full[0][r * shard_elems + i]} - shards[r][i]);
      RC_ASSERT(error <= element_bound(shards[r], i, static_cast<std::size_t>(block), bits));
    }
  }
  const std::int64_t shard_bytes =
      quantized_bytes(static_cast<std::int64_t>(shard_elems), block, bits);
  RC_ASSERT(sim.traffic(0).sent_bytes(CollectiveKind::AllGather) == (world - 1) * shard_bytes);
}

// One run of qgZ's reduce: every rank's own sum.
std::vector<Values> run_reduce(const std::vector<Values>& full, int gpus, std::size_t shard_elems,
                               std::int64_t block, QuantBits bits, SimWorld& sim) {
  std::vector<Values> sums(full.size(), Values(shard_elems));
  const int nodes = sim.size() / gpus;
  sim.run([&](Comm& comm) {
    const auto r = static_cast<std::size_t>(comm.rank());
    const std::unique_ptr<Comm> node = comm.split(comm.rank() / gpus);
    const std::unique_ptr<Comm> across = nodes > 1 ? comm.split(comm.rank() % gpus) : nullptr;
    const auto block_of = [&](std::int64_t b, std::span<float> out) {
      std::ranges::copy_n(full[r].begin() + b * std::ssize(out), std::ssize(out), out.begin());
    };
    quantized_reduce_scatter_sum(*node, across.get(), block_of, sums[r], block, bits);
  });
  return sums;
}

RC_GTEST_PROP(QuantizedCollectives,
              prop_the_reduce_is_repeatable_and_each_sum_within_its_blocks_bounds, ()) {
  const int world = *gen_world();
  const int gpus = *gen_gpus_per_node(world);
  const int nodes = world / gpus;
  const auto shard_elems = *rc::gen::inRange<std::size_t>(1, 24);
  const std::int64_t block = 2 * *rc::gen::inRange<std::int64_t>(1, 9);
  const QuantBits bits = *gen_bits();
  const auto w = static_cast<std::size_t>(world);
  const auto full = *rc::gen::container<std::vector<Values>>(w, gen_values(w * shard_elems));
  SimWorld sim(world, {.gpus_per_node = gpus});
  const std::vector<Values> sums = run_reduce(full, gpus, shard_elems, block, bits, sim);
  RC_ASSERT(run_reduce(full, gpus, shard_elems, block, bits, sim) == sums);

  const auto S = shard_elems;
  const auto L = static_cast<std::size_t>(gpus);
  const auto N = static_cast<std::size_t>(nodes);
  const auto B = static_cast<std::size_t>(block);
  // Stage 1: rank q's piece for local rank j is blocks n L + j of every node n; element i of
  // world block n L + j sits at n S + i there.
  auto piece_of = [&](std::size_t q, std::size_t j) {
    Values piece;
    for (std::size_t n = 0; n < N; ++n) {
      const auto from = full[q].begin() + static_cast<std::ptrdiff_t>((n * L + j) * S);
      piece.insert(piece.end(), from, from + static_cast<std::ptrdiff_t>(S));
    }
    return piece;
  };
  const double rounding = static_cast<double>(L + N) * std::ldexp(1.0, -23);
  for (std::size_t n = 0; n < N; ++n) {
    for (std::size_t j = 0; j < L; ++j) {
      // For each node m: the bound of its node sum at each position of this rank's piece, and
      // the magnitude the sum may reach there.
      std::vector<Values> stage1_bound(N, Values(N * S)), node_reach(N, Values(N * S));
      for (std::size_t m = 0; m < N; ++m) {
        for (std::size_t l = 0; l < L; ++l) {
          const Values piece = piece_of(m * L + l, j);
          for (std::size_t p = 0; p < N * S; ++p) {
            const double b = element_bound(piece, p, B, bits);
            stage1_bound[m][p] += static_cast<float>(b);
            node_reach[m][p] +=
                static_cast<float>((std::fabs(double{piece[p]}) + b) * (1 + rounding));
          }
        }
      }
      const std::size_t rank = n * L + j;
      for (std::size_t i = 0; i < S; ++i) {
        double exact = 0.0, magnitude = 0.0, bound = 0.0;
        for (std::size_t q = 0; q < w; ++q) {
          exact += full[q][rank * S + i];
          magnitude += std::fabs(double{full[q][rank * S + i]});
        }
        for (std::size_t m = 0; m < N; ++m) {
          bound += stage1_bound[m][n * S + i];
          if (N == 1) continue;
          // Stage 2: node m's sum, cut in pieces of S, is quantized in blocks from n S.
          const std::size_t first = n * S + i / B * B;
          const std::size_t last = std::min(n * S + S, first + B);
          double reach = 0.0;
          for (std::size_t p = first; p < last; ++p)
            reach = std::max(reach, double{node_reach[m][p]});
          bound += quantization_error_bound(reach, bits);
        }
        bound *= 1 + rounding;
        bound += rounding * (magnitude + bound);
        RC_ASSERT(std::fabs(double{sums[rank][i]} - exact) <= bound);
      }
      // Bytes: the L-1 pieces for the node's other ranks, then N-1 for the other nodes.
      const auto piece_bytes = quantized_bytes(static_cast<std::int64_t>(N * S), block, bits);
      const auto shard_bytes = quantized_bytes(static_cast<std::int64_t>(S), block, bits);
      const TrafficLedger& ledger = sim.traffic(static_cast<int>(rank));
      RC_ASSERT(ledger.sent_bytes(CollectiveKind::AllToAll) ==
                static_cast<std::int64_t>(L - 1) * piece_bytes +
                    static_cast<std::int64_t>(N - 1) * shard_bytes);
      // With several ranks a node, only the second all_to_all's group has one rank a node (the
      // splits' own all_gathers span the world).
      if (L > 1) {
        RC_ASSERT(ledger.sent_bytes(LinkLevel::Across) ==
                  static_cast<std::int64_t>(N - 1) * shard_bytes);
      }
    }
  }
}

}  // namespace
}  // namespace zl::simtest
