// collectives_bench.cpp — one SimWorld per world size; every rank runs the same sweep, so the
// calls match. Per point: one warm-up call, one call that rank 0 times to choose how many calls
// to time (broadcast to all, so every rank makes the same number), then that many calls, each
// after a barrier, timed on rank 0. Each op's 4 KiB latency is such a point, timed first.
#include "bench/collectives_bench.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <thread>
#include <tuple>

#include "bench/timing.hpp"
#include "core/error.hpp"
#include "execute.hpp"
#include "sim_world.hpp"

namespace zl::bench {

namespace {

constexpr std::size_t kElemBytes = sizeof(float);
const std::vector<std::string> kOps = {"all_reduce", "reduce_scatter", "all_gather"};

// One rank's buffers for one point, and the call that uses them.
struct Point {
  std::string op;
  std::size_t count = 0;  // the count argument of the call
  std::vector<float> send, recv;

  void call(Comm& comm) {
    if (op == "all_reduce") {
      comm.all_reduce(send.data(), count, DType::F32, ReduceOp::Sum);
    } else if (op == "reduce_scatter") {
      comm.reduce_scatter(send.data(), recv.data(), count, DType::F32, ReduceOp::Sum);
    } else {
      comm.all_gather(send.data(), recv.data(), count, DType::F32);
    }
  }
};

// The call's count and buffers for nccl-tests' `bytes` in a world of `world`.
Point make_point(const std::string& op, std::size_t bytes, std::size_t world) {
  Point point{.op = op, .count = 0, .send = {}, .recv = {}};
  if (op == "all_reduce") {
    point.count = bytes / kElemBytes;
    point.send.assign(point.count, 1.0f);
  } else if (op == "reduce_scatter") {
    point.count = bytes / (kElemBytes * world);
    point.send.assign(point.count * world, 1.0f);
    point.recv.assign(point.count, 0.0f);
  } else {
    point.count = bytes / (kElemBytes * world);
    point.send.assign(point.count, 1.0f);
    point.recv.assign(point.count * world, 0.0f);
  }
  return point;
}

std::size_t point_bytes(const std::string& op, std::size_t count, std::size_t world) {
  return op == "all_reduce" ? count * kElemBytes : count * world * kElemBytes;
}

std::vector<std::size_t> sizes_of(const CollectivesBenchOptions& options) {
  std::vector<std::size_t> sizes;
  for (std::size_t bytes = options.min_bytes; bytes <= options.max_bytes;) {
    sizes.push_back(bytes);
    if (bytes > options.max_bytes / options.size_factor) break;
    bytes *= options.size_factor;
  }
  return sizes;
}

// How many calls one point times, and their median on rank 0.
struct PointTiming {
  int iters = 0;
  double ms = 0.0;
};

// Times `point` on every rank (see the file comment); the median is rank 0's.
PointTiming time_point(Comm& comm, Point& point, const CollectivesBenchOptions& options) {
  point.call(comm);  // warm-up: pages touched, caches and threads settled
  comm.barrier();
  double start_ms = steady_ms();
  point.call(comm);
  std::int64_t iters = std::clamp<std::int64_t>(
      static_cast<std::int64_t>(options.budget_ms / std::max(steady_ms() - start_ms, 1e-3)),
      options.min_iters, options.max_iters);
  comm.broadcast(&iters, 1, DType::I64, 0);
  std::vector<double> samples_ms;
  for (std::int64_t i = 0; i < iters; ++i) {
    comm.barrier();
    start_ms = steady_ms();
    point.call(comm);
    samples_ms.push_back(steady_ms() - start_ms);
  }
  return {.iters = static_cast<int>(iters), .ms = median_ms(samples_ms)};
}

// The sweep on one world; rank 0 appends the rows.
void sweep_world(int world, const CollectivesBenchOptions& options,
                 CollectivesBenchResult& result) {
  const std::vector<std::size_t> sizes = sizes_of(options);
  const auto w = static_cast<std::size_t>(world);
  SimWorld(world).run([&](Comm& comm) {
    for (const std::string& op : kOps) {
      Point small = make_point(op, kLatencyBytes, w);
      const PointTiming latency = time_point(comm, small, options);
      if (comm.rank() == 0) {
        result.latencies.push_back({.op = op,
                                    .world = world,
                                    .bytes = point_bytes(op, small.count, w),
                                    .iters = latency.iters,
                                    .us = latency.ms * 1e3});
      }
      for (const std::size_t size_bytes : sizes) {
        Point point = make_point(op, size_bytes, w);
        const PointTiming timing = time_point(comm, point, options);
        if (comm.rank() != 0) continue;
        CollectiveRow row{.op = op,
                          .world = world,
                          .bytes = point_bytes(op, point.count, w),
                          .iters = timing.iters,
                          .ms = timing.ms,
                          .algbw_gbps = 0.0,
                          .busbw_gbps = 0.0,
                          .memcpy_gbps = 0.0,
                          .ideal_busbw_gbps = 0.0,
                          .busbw_over_ideal = 0.0};
        row.algbw_gbps = gbps(static_cast<double>(row.bytes), row.ms);
        row.busbw_gbps = row.algbw_gbps * busbw_factor(op, world);
        result.rows.push_back(row);
      }
    }
  });
}

// Position of `op` in kOps, to sort by.
std::ptrdiff_t op_order(const std::string& op) {
  return std::find(kOps.begin(), kOps.end(), op) - kOps.begin();
}

}  // namespace

double busbw_factor(const std::string& op, int world) {
  const double w = world;
  if (op == "all_reduce") return 2.0 * (w - 1.0) / w;
  return (w - 1.0) / w;
}

double ideal_busbw_fraction(const std::string& op, int world) {
  const double w = world;
  const double traffic_per_byte = op == "all_reduce" ? 2.0 * w : w + 1.0;
  return busbw_factor(op, world) * 2.0 / traffic_per_byte;
}

std::vector<double> memcpy_samples_ms(std::size_t bytes, int repeats, int threads) {
  ZL_CHECK(bytes > 0 && repeats > 0 && threads > 0,
           "memcpy needs bytes > 0, repeats > 0 and threads > 0");
  std::vector<std::byte> src(bytes, std::byte{1});
  std::vector<std::byte> dst(bytes, std::byte{0});
  const auto parts = static_cast<std::size_t>(threads);
  auto copy_part = [&](std::size_t t) {
    const std::size_t begin = bytes * t / parts;
    std::memcpy(dst.data() + begin, src.data() + begin, bytes * (t + 1) / parts - begin);
  };
  std::vector<double> samples_ms;
  for (int r = 0; r <= repeats; ++r) {  // copy 0 warms up
    const double start_ms = steady_ms();
    {
      std::vector<std::jthread> helpers;
      for (std::size_t t = 1; t < parts; ++t) helpers.emplace_back(copy_part, t);
      copy_part(0);
    }
    if (r > 0) samples_ms.push_back(steady_ms() - start_ms);
  }
  return samples_ms;
}

CollectivesBenchResult run_collectives_bench(const CollectivesBenchOptions& options) {
  ZL_CHECK(!options.worlds.empty(), "no world sizes to sweep: give --worlds, e.g. 2..8");
  for (const int world : options.worlds) {
    ZL_CHECK(world >= 1 && world <= 64, "world {} is invalid: use 1 to 64 ranks", world);
  }
  ZL_CHECK(options.min_bytes >= kElemBytes && options.min_bytes <= options.max_bytes,
           "sizes {} to {} bytes are invalid: give 4 <= --min-bytes <= --max-bytes",
           options.min_bytes, options.max_bytes);
  ZL_CHECK(options.size_factor >= 2, "size factor {} is invalid: use 2 or more",
           options.size_factor);
  CollectivesBenchResult result;
  result.memcpy_bytes = options.memcpy_bytes;
  result.memcpy_threads = options.memcpy_threads > 0 ? options.memcpy_threads
                                                     : static_cast<int>(max_collective_threads());
  // Each world's ideal uses the copies just before and after its sweep, so a change in the
  // machine's load between worlds does not move the ratio.
  std::vector<double> all_copies_ms;
  for (const int world : options.worlds) {
    std::vector<double> copies_ms =
        memcpy_samples_ms(options.memcpy_bytes, 5, result.memcpy_threads);
    const std::size_t first_row = result.rows.size();
    sweep_world(world, options, result);
    for (const double ms : memcpy_samples_ms(options.memcpy_bytes, 5, result.memcpy_threads)) {
      copies_ms.push_back(ms);
    }
    const double world_memcpy_gbps =
        gbps(static_cast<double>(options.memcpy_bytes), median_ms(copies_ms));
    for (std::size_t i = first_row; i < result.rows.size(); ++i) {
      CollectiveRow& row = result.rows[i];
      row.memcpy_gbps = world_memcpy_gbps;
      row.ideal_busbw_gbps = world_memcpy_gbps * ideal_busbw_fraction(row.op, row.world);
      row.busbw_over_ideal = row.busbw_gbps / row.ideal_busbw_gbps;
    }
    all_copies_ms.insert(all_copies_ms.end(), copies_ms.begin(), copies_ms.end());
  }
  result.memcpy_gbps = gbps(static_cast<double>(options.memcpy_bytes), median_ms(all_copies_ms));
  std::stable_sort(result.rows.begin(), result.rows.end(),
                   [](const CollectiveRow& a, const CollectiveRow& b) {
                     return std::tuple(op_order(a.op), a.world, a.bytes) <
                            std::tuple(op_order(b.op), b.world, b.bytes);
                   });
  std::stable_sort(result.latencies.begin(), result.latencies.end(),
                   [](const LatencyRow& a, const LatencyRow& b) {
                     return std::tuple(op_order(a.op), a.world) <
                            std::tuple(op_order(b.op), b.world);
                   });
  return result;
}

}  // namespace zl::bench
