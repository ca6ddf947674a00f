// collectives_bench.hpp — `zerolab bench collectives`: the simulator's all_reduce, reduce_scatter
// and all_gather timed for each world size and message size, reported as nccl-tests does
// (src/common.h and doc/PERFORMANCE.md there):
//   algbw = bytes / time
//   busbw = algbw * 2(W-1)/W  for all_reduce   (each rank sends and receives 2(W-1)/W * bytes)
//   busbw = algbw * (W-1)/W   for reduce_scatter and all_gather
// where bytes is the all_reduce buffer, and for reduce_scatter and all_gather the whole buffer of
// W blocks (W * count * 4 for fp32). The same run measures memcpy bandwidth, the yardstick busbw
// is compared with: the sim moves bytes through the same memory a memcpy does.
//
// The ideal: nccl-tests' busbw counts what each rank sends over its own link, but the sim's ranks
// share one memory. A shared-memory collective must read every input once and write every
// output once: all_reduce 2*W*bytes, reduce_scatter and all_gather (W+1)*bytes, where a memcpy
// of `bytes` moves 2*bytes. Moving only that at memcpy speed would give
//   busbw = memcpy * 2(W-1)/W^2          for all_reduce     (1/2 at W=2, 7/32 at W=8)
//   busbw = memcpy * 2(W-1)/(W(W+1))     for the others     (1/3 at W=2, 7/36 at W=8)
// The memcpy runs on as many threads as the sim gives one large collective (every hardware
// thread, sim/execute.hpp), each copying its own part, so both use the same cores: busbw / ideal
// is the fraction of the machine's copy bandwidth the collective reaches.
//
// Small messages are bound by the rendezvous, not by memory: each row of `latencies` is the
// median time of one 4 KiB call (nccl-tests' bytes) per op and world.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace zl::bench {

/// What to sweep. Sizes go min_bytes, min_bytes * size_factor, ... up to max_bytes.
struct CollectivesBenchOptions {
  std::vector<int> worlds{2, 3, 4, 5, 6, 7, 8};    ///< world sizes, each swept in full
  std::size_t min_bytes = std::size_t{4} << 10;    ///< smallest size (nccl-tests' bytes), 4 KiB
  std::size_t max_bytes = std::size_t{256} << 20;  ///< largest size, 256 MiB
  std::size_t size_factor = 4;                     ///< each size is the last times this, >= 2
  /// Timed calls per point: enough to fill about budget_ms, within [min_iters, max_iters].
  double budget_ms = 150.0;
  int min_iters = 3;    ///< timed calls per point at least, however slow
  int max_iters = 200;  ///< timed calls per point at most, however fast
  /// Bytes of the memcpy that measures memory bandwidth (larger than the caches).
  std::size_t memcpy_bytes = std::size_t{256} << 20;
  /// Threads of that memcpy; 0 for as many as the sim gives one large collective.
  int memcpy_threads = 0;
};

/// One point of the sweep; ms is the median over the timed calls on rank 0.
struct CollectiveRow {
  std::string op;            ///< "all_reduce", "reduce_scatter" or "all_gather"
  int world = 0;             ///< ranks (threads) in the SimWorld
  std::size_t bytes = 0;     ///< nccl-tests' size (see above), rounded down to whole fp32 blocks
  int iters = 0;             ///< timed calls behind the median
  double ms = 0.0;           ///< median time of one call on rank 0
  double algbw_gbps = 0.0;   ///< bytes / ms, decimal GB/s
  double busbw_gbps = 0.0;   ///< algbw_gbps * busbw_factor(op, world)
  double memcpy_gbps = 0.0;  ///< the memcpy speed of this world's sweep (see below)
  double ideal_busbw_gbps = 0.0;  ///< the ideal above, at memcpy_gbps
  double busbw_over_ideal = 0.0;  ///< busbw_gbps / ideal_busbw_gbps
};

/// The small-message latency of one op in one world.
struct LatencyRow {
  std::string op;         ///< as in CollectiveRow
  int world = 0;          ///< ranks (threads) in the SimWorld
  std::size_t bytes = 0;  ///< nccl-tests' size: kLatencyBytes rounded down to whole fp32 blocks
  int iters = 0;          ///< timed calls behind the median
  double us = 0.0;        ///< median time of one call on rank 0, microseconds
};

/// The message size of the latency rows, 4 KiB.
inline constexpr std::size_t kLatencyBytes = std::size_t{4} << 10;

/// The sweep and its yardstick.
struct CollectivesBenchResult {
  /// std::memcpy of memcpy_bytes on memcpy_threads threads, bytes copied / time: the median of
  /// 5 copies before and 5 after each world's sweep, over all worlds. Each row's ideal uses the
  /// median of its own world's 10 (CollectiveRow::memcpy_gbps).
  double memcpy_gbps = 0.0;
  std::size_t memcpy_bytes = 0;       ///< size of each memcpy measured
  int memcpy_threads = 0;             ///< threads sharing each memcpy
  std::vector<CollectiveRow> rows;    ///< by op, then world, then bytes
  std::vector<LatencyRow> latencies;  ///< kLatencyBytes calls, by op, then world
};

/// busbw / algbw for `op` in a world of `world` ranks (nccl-tests' factor).
double busbw_factor(const std::string& op, int world);

/// The ideal busbw / memcpy bandwidth for `op` in a world of `world` (above).
double ideal_busbw_fraction(const std::string& op, int world);

/// Times of `repeats` memcpy calls of `bytes` (after one warm-up), in ms, each cut into
/// `threads` equal parts copied by as many threads at once.
std::vector<double> memcpy_samples_ms(std::size_t bytes, int repeats, int threads);

/// Runs the sweep on SimWorld. Throws zl::Error for an empty or invalid sweep.
CollectivesBenchResult run_collectives_bench(const CollectivesBenchOptions& options);

}  // namespace zl::bench
