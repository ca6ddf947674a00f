// sim_test_support.hpp — generators and answer keys for the simulator tests: worlds and buffers
// of every dtype with values of mixed magnitude, typed element access, the rank-order loops
// written out here (not by calling reduce_rank_order) so the tests check the sim, not themselves,
// and the process's thread count, to show that no rank's thread outlives a run.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rapidcheck.h>

#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "comm/comm.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "sim_world.hpp"
#include "timeline.hpp"

namespace zl {

// RapidCheck prints counterexamples with these, e.g. "bf16" rather than a number.
inline void showValue(DType dtype, std::ostream& os) {
  os << dtype_name(dtype);
}
inline void showValue(ReduceOp op, std::ostream& os) {
  os << reduce_op_name(op);
}

namespace simtest {

using Bytes = std::vector<std::uint8_t>;

// Burns `ms` of this thread's CPU time: "compute" the timeline measures.
inline void burn_cpu_ms(double ms) {
  const double start_ms = thread_cpu_ms();
  volatile double sink = 0.0;
  while (thread_cpu_ms() - start_ms < ms) {
    for (int i = 0; i < 1000; ++i) sink = sink + std::sqrt(static_cast<double>(i));
  }
}

/// World sizes 1..8, shrinking towards 1.
inline rc::Gen<int> gen_world() {
  return rc::gen::inRange(1, 9);
}

/// A number of GPUs a node that divides `world`: 1, `world`, or one between.
inline rc::Gen<int> gen_gpus_per_node(int world) {
  std::vector<int> divisors;
  for (int g = 1; g <= world; ++g) {
    if (world % g == 0) divisors.push_back(g);
  }
  return rc::gen::elementOf(divisors);
}

/// The dtypes every collective supports.
inline rc::Gen<DType> gen_float_dtype() {
  return rc::gen::element(DType::F32, DType::BF16, DType::F16, DType::F64);
}

/// The dtypes all_gather and broadcast support.
inline rc::Gen<DType> gen_any_dtype() {
  return rc::gen::element(DType::F32, DType::BF16, DType::F16, DType::F64, DType::I64, DType::I8);
}

inline rc::Gen<ReduceOp> gen_op() {
  return rc::gen::element(ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max);
}

inline std::size_t elem_bytes(DType dtype) {
  return dtype_bytes(dtype);
}

/// Element `i` of a `dtype` buffer as a double (exact for every float dtype).
inline double value_at(DType dtype, const Bytes& buffer, std::size_t i) {
  const std::uint8_t* at = buffer.data() + i * elem_bytes(dtype);
  std::uint16_t half = 0;
  float single = 0;
  double wide = 0;
  std::int64_t integer = 0;
  switch (dtype) {
    case DType::F32:
      std::memcpy(&single, at, sizeof single);
      return single;
    case DType::F64:
      std::memcpy(&wide, at, sizeof wide);
      return wide;
    case DType::BF16:
      std::memcpy(&half, at, sizeof half);
      return bf16_to_f32(half);
    case DType::F16:
      std::memcpy(&half, at, sizeof half);
      return f16_to_f32(half);
    case DType::I64:
      std::memcpy(&integer, at, sizeof integer);
      return static_cast<double>(integer);
    case DType::I8:
      return static_cast<double>(static_cast<std::int8_t>(*at));
  }
  return 0;
}

/// Stores `value` as element `i`; fp32 and the 16-bit types round from float, as reduce.hpp does.
inline void put(DType dtype, Bytes& buffer, std::size_t i, double value) {
  std::uint8_t* at = buffer.data() + i * elem_bytes(dtype);
  const auto single = static_cast<float>(value);
  std::uint16_t half = 0;
  switch (dtype) {
    case DType::F32:
      std::memcpy(at, &single, sizeof single);
      return;
    case DType::F64:
      std::memcpy(at, &value, sizeof value);
      return;
    case DType::BF16:
      half = f32_to_bf16(single);
      break;
    case DType::F16:
      half = f32_to_f16(single);
      break;
    case DType::I8:
      *at = static_cast<std::uint8_t>(static_cast<std::int8_t>(value));
      return;
    case DType::I64: {
      const auto integer = static_cast<std::int64_t>(value);
      std::memcpy(at, &integer, sizeof integer);
      return;
    }
  }
  std::memcpy(at, &half, sizeof half);
}

/// m * 2^e with |m| <= 1000: values from tiny to huge, so sums cancel and round. fp16's range
/// is kept small enough that a single value stays finite.
inline rc::Gen<double> gen_value(DType dtype) {
  const int max_exponent = dtype == DType::F16 ? 4 : 30;
  const int min_exponent = dtype == DType::F16 ? -14 : -30;
  return rc::gen::map(rc::gen::pair(rc::gen::inRange(-1000, 1001),
                                    rc::gen::inRange(min_exponent, max_exponent + 1)),
                      [](std::pair<int, int> me) { return std::ldexp(me.first, me.second); });
}

/// Per rank, `elems` random values of mixed magnitude (shown as numbers in counterexamples).
inline rc::Gen<std::vector<std::vector<double>>> gen_rank_values(DType dtype, int world,
                                                                 std::size_t elems) {
  return rc::gen::container<std::vector<std::vector<double>>>(
      static_cast<std::size_t>(world),
      rc::gen::container<std::vector<double>>(elems, gen_value(dtype)));
}

/// Each rank's values as a `dtype` buffer.
inline std::vector<Bytes> encode(DType dtype, const std::vector<std::vector<double>>& values) {
  std::vector<Bytes> buffers;
  for (const auto& rank_values : values) {
    Bytes& buffer = buffers.emplace_back(rank_values.size() * elem_bytes(dtype));
    for (std::size_t i = 0; i < rank_values.size(); ++i) put(dtype, buffer, i, rank_values[i]);
  }
  return buffers;
}

/// `size_bytes` arbitrary bytes (any bit pattern, NaN payloads included).
inline rc::Gen<Bytes> gen_raw_bytes(std::size_t size_bytes) {
  return rc::gen::container<Bytes>(size_bytes, rc::gen::arbitrary<std::uint8_t>());
}

/// The answer key for Sum and Avg, one element at a time, ranks left to right:
///   acc = x[0]; acc = acc + x[1]; ...; acc = acc + x[W-1]; Avg: acc = acc / W; round once.
/// fp64 accumulates in double, the others in float. With `gpus_per_node` G (0: one node), each
/// node's G ranks are added so, the node's sum rounded to the dtype when there are several
/// nodes, the node sums added so.
inline Bytes rank_order_sum(DType dtype, const std::vector<Bytes>& inputs, bool average,
                            std::size_t gpus_per_node = 0) {
  const std::size_t elems = inputs.front().size() / elem_bytes(dtype);
  const auto world = inputs.size();
  const std::size_t per_node = gpus_per_node == 0 ? world : gpus_per_node;
  Bytes out(inputs.front().size());
  Bytes node_sum(elem_bytes(dtype));  // a node's sum, rounded to the dtype as it crosses nodes
  for (std::size_t i = 0; i < elems; ++i) {
    double total = 0.0;
    for (std::size_t first = 0; first < world; first += per_node) {
      double acc = value_at(dtype, inputs[first], i);
      for (std::size_t r = first + 1; r < first + per_node; ++r) {
        acc = dtype == DType::F64
                  ? acc + value_at(dtype, inputs[r], i)
                  : static_cast<float>(static_cast<float>(acc) +
                                       static_cast<float>(value_at(dtype, inputs[r], i)));
      }
      put(dtype, node_sum, 0, acc);
      const double node = per_node < world ? value_at(dtype, node_sum, 0) : acc;
      total = first == 0 ? node
              : dtype == DType::F64
                  ? total + node
                  : static_cast<float>(static_cast<float>(total) + static_cast<float>(node));
    }
    if (average) {
      total = dtype == DType::F64
                  ? total / static_cast<double>(world)
                  : static_cast<float>(static_cast<float>(total) / static_cast<float>(world));
    }
    put(dtype, out, i, total);
  }
  return out;
}

/// Element `i`'s bits in hex, most significant byte first (little-endian host).
inline std::string hex_bits(DType dtype, const Bytes& buffer, std::size_t i) {
  std::string hex = "0x";
  for (std::size_t b = elem_bytes(dtype); b-- > 0;) {
    hex += fmt::format("{:02x}", static_cast<unsigned>(buffer[i * elem_bytes(dtype) + b]));
  }
  return hex;
}

/// "" when `got` and `want` hold the same bits, else the first differing element, both ways.
inline std::string first_difference(DType dtype, const Bytes& got, const Bytes& want) {
  if (got.size() != want.size())
    return fmt::format("sizes {} vs {} bytes", got.size(), want.size());
  const std::size_t size = elem_bytes(dtype);
  for (std::size_t i = 0; i < got.size() / size; ++i) {
    if (std::memcmp(got.data() + i * size, want.data() + i * size, size) == 0) continue;
    return fmt::format("{} elem {}: got {} ({}) want {} ({})", dtype_name(dtype), i,
                       value_at(dtype, got, i), hex_bits(dtype, got, i), value_at(dtype, want, i),
                       hex_bits(dtype, want, i));
  }
  return "";
}

/// Success when `text` contains `part`; the failure message shows both.
inline ::testing::AssertionResult contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << "\"" << text << "\"\n  does not contain \"" << part << "\"";
}

/// Seconds `body` takes.
template <class Body>
double seconds_taken(Body&& body) {
  const auto start = std::chrono::steady_clock::now();
  body();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Threads of this process now, from /proc/self/task.
inline int thread_count() {
  int count = 0;
  for ([[maybe_unused]] const auto& task : std::filesystem::directory_iterator("/proc/self/task"))
    ++count;
  return count;
}

/// The thread count once it has stopped falling: polls until two reads 50 ms apart agree (at most
/// two seconds), since an exiting thread leaves /proc/self/task a moment after join() returns.
inline int steady_thread_count() {
  int count = thread_count();
  for (int i = 0; i < 40; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const int now = thread_count();
    if (now == count) break;
    count = now;
  }
  return count;
}

/// The thread count before a run, taken after one run has started any helper thread that a
/// sanitizer's runtime keeps for the rest of the process, and after the threads of earlier runs
/// have left /proc/self/task.
inline int baseline_thread_count() {
  SimWorld(2).run([](Comm& comm) { comm.barrier(); });
  return steady_thread_count();
}

/// Waits up to a second for the thread count to come down to `expected` and returns the last
/// count seen. A rank thread that outlives its run keeps it above `expected`; it may read below
/// when a thread counted in the baseline has since left.
inline int settled_thread_count(int expected) {
  int count = thread_count();
  for (int i = 0; i < 100 && count > expected; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    count = thread_count();
  }
  return count;
}

/// The message of the zl::Error that `world.run(body)` throws; a test failure if it throws none.
inline std::string run_error(SimWorld& world, const std::function<void(Comm&)>& body) {
  try {
    world.run(body);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "run() did not throw";
  return "";
}

}  // namespace simtest
}  // namespace zl
