// cpu_threads_test.cpp — the CPU device's threads change no bit: every kernel on 2 or 3 threads
// gives what it gives on one, for random shapes at both grains, and the pool runs every task once
// and passes a task's exception to the caller.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "ops/cpu/cpu_gemm.hpp"
#include "ops/cpu/cpu_thread_pool.hpp"

namespace zl {
namespace {

std::vector<float> normals(std::uint64_t stream, std::int64_t elems) {
  std::vector<float> values(static_cast<std::size_t>(elems));
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = standard_normal(7, stream, i);
  return values;
}

// Every output of every kernel on one shape, one after the other.
struct Shape {
  std::int64_t rows, in, out, batch, seq_len, heads, head_dim;
};

std::vector<float> all_outputs(CpuDevice& device, const Shape& s) {
  std::vector<float> results;
  const auto keep = [&](const std::vector<float>& v) {
    results.insert(results.end(), v.begin(), v.end());
  };
  const auto x = normals(1, s.rows * s.in), w = normals(2, s.out * s.in), b = normals(3, s.out);
  const auto dy = normals(4, s.rows * s.out);
  std::vector<float> y(static_cast<std::size_t>(s.rows * s.out)),
      dw = normals(5, s.out * s.in), db = normals(6, s.out),
      dx(static_cast<std::size_t>(s.rows * s.in));
  device.linear_forward(x, w, b, y, s.rows, s.in, s.out);
  device.linear_backward(x, w, dy, dw, db, dx, s.rows, s.in, s.out);
  keep(y), keep(dw), keep(db), keep(dx);
  device.conv1d_forward(x, w, b, y, s.rows, s.in, s.out);
  device.conv1d_backward(x, w, dy, dw, db, dx, s.rows, s.in, s.out);
  keep(y), keep(dw), keep(db), keep(dx);
  std::vector<float> gelu(x.size()), dgelu(x.size());
  device.gelu_forward(x, gelu);
  device.gelu_backward(x, normals(7, s.rows * s.in), dgelu);
  keep(gelu), keep(dgelu);
  device.gelu_tanh_forward(x, gelu);
  device.gelu_tanh_backward(x, normals(7, s.rows * s.in), dgelu);
  keep(gelu), keep(dgelu);
  const auto weight = normals(8, s.in), bias = normals(9, s.in);
  std::vector<float> ln(x.size()), mean(static_cast<std::size_t>(s.rows)), rstd(mean.size());
  std::vector<float> dweight = normals(10, s.in), dbias = normals(11, s.in),
                     dln = normals(12, s.rows * s.in);
  device.layernorm_forward(x, weight, bias, ln, mean, rstd, s.rows, s.in);
  device.layernorm_backward(x, weight, mean, rstd, normals(13, s.rows * s.in), dln, dweight, dbias,
                            s.rows, s.in);
  keep(ln), keep(mean), keep(rstd), keep(dln), keep(dweight), keep(dbias);
  std::vector<std::int64_t> labels(static_cast<std::size_t>(s.rows));
  for (std::size_t r = 0; r < labels.size(); ++r) labels[r] = static_cast<std::int64_t>(r) % s.out;
  std::vector<float> dlogits(y.size());
  results.push_back(
      device.cross_entropy_forward_backward(y, labels, dlogits, s.rows, s.out, s.out));
  keep(dlogits);
  const std::int64_t C = s.heads * s.head_dim, N = s.batch * s.seq_len;
  const auto qkv = normals(14, N * 3 * C), dout = normals(15, N * C);
  std::vector<float> stats(static_cast<std::size_t>(s.batch * s.heads * s.seq_len * 2)),
      att(static_cast<std::size_t>(N * C)), dqkv(qkv.size());
  device.attention_forward(qkv, stats, att, s.batch, s.seq_len, C, s.heads);
  device.attention_backward(qkv, stats, att, dout, dqkv, s.batch, s.seq_len, C, s.heads);
  keep(stats), keep(att), keep(dqkv);
  return results;
}

RC_GTEST_PROP(CpuThreads, prop_every_kernel_gives_the_same_bits_on_any_thread_count, ()) {
  const Shape shape{.rows = *rc::gen::inRange<std::int64_t>(1, 300),
                    .in = *rc::gen::inRange<std::int64_t>(1, 200),
                    .out = *rc::gen::inRange<std::int64_t>(1, 300),
                    .batch = *rc::gen::inRange<std::int64_t>(1, 4),
                    .seq_len = *rc::gen::inRange<std::int64_t>(1, 24),
                    .heads = *rc::gen::inRange<std::int64_t>(1, 4),
                    .head_dim = *rc::gen::inRange<std::int64_t>(1, 12)};
  const auto grain = *rc::gen::element(cpu::Grain::Normal, cpu::Grain::Fine);
  const int threads = *rc::gen::inRange(2, 4);
  CpuDevice one(1, grain), many(threads, grain);
  const auto expected = all_outputs(one, shape);
  const auto actual = all_outputs(many, shape);
  RC_ASSERT(expected.size() == actual.size());
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (std::memcmp(&expected[i], &actual[i], sizeof(float)) != 0) {
      RC_FAIL(fmt::format("output element {} differs: {} on 1 thread, {} on {}", i, expected[i],
                          actual[i], threads));
    }
  }
}

// The shapes of a GPT step are cut into several tiles at the normal grain, so the threads share
// the real products, not only the tests' fine ones.
TEST(CpuThreads, TrainingShapesSplitIntoEvenTileCounts) {
  for (const auto& [m, n, k] : std::vector<std::array<std::int64_t, 3>>{
           {2048, 1152, 384}, {2048, 384, 1536}, {384, 1536, 2048}, {384, 384, 2048}}) {
    const std::int64_t tile = cpu::gemm_tile_elems(m, n, k, cpu::Grain::Normal);
    const std::int64_t tiles = (std::max(m, n) + tile - 1) / tile;
    EXPECT_GE(tiles, 2) << m << " x " << n << " x " << k;
    EXPECT_EQ(tiles % 2, 0) << m << " x " << n << " x " << k;
  }
  EXPECT_EQ(cpu::gemm_tile_elems(8, 8, 8, cpu::Grain::Normal), 8);  // small: one tile
}

TEST(CpuThreads, PoolRunsEveryTaskOnceAndRethrows) {
  cpu::CpuThreadPool pool(3);
  EXPECT_EQ(pool.threads(), 3);
  for (const std::int64_t tasks : {0, 1, 2, 7, 100}) {
    std::vector<std::atomic<int>> runs(static_cast<std::size_t>(tasks));
    pool.run(tasks, [&](std::int64_t i) { ++runs[static_cast<std::size_t>(i)]; });
    for (const auto& count : runs) EXPECT_EQ(count.load(), 1);
  }
  EXPECT_THROW(pool.run(5,
                        [](std::int64_t i) {
                          if (i == 3) throw std::runtime_error("task 3");
                        }),
               std::runtime_error);
  std::atomic<int> after{0};
  pool.run(4, [&](std::int64_t) { ++after; });  // still works after a failed run
  EXPECT_EQ(after.load(), 4);
  EXPECT_THROW(cpu::CpuThreadPool(0), Error);
}

}  // namespace
}  // namespace zl
