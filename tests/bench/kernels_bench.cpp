// kernels_bench.cpp — microbenchmarks of the CPU kernels, reported as time and bytes per second:
// AdamW (reference on one thread, fused on 1..N threads; 28 bytes per parameter), GELU forward
// (8 bytes per element), linear forward (flops as items), and reduce_rank_order over W ranks
// ((W + 1) * 4 bytes per element). Run: build/ci/tests/bench/bench_kernels
// [--benchmark_filter=adam]
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "comm/reduce.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "optim/adamw.hpp"
#include "optim/adamw_fused.hpp"

namespace zl {
namespace {

// p, g, m and v of n parameters with values an update keeps in the normal range.
struct AdamArrays {
  explicit AdamArrays(std::size_t n) : params(n), grads(n), exp_avg(n), exp_avg_sq(n) {
    for (std::size_t i = 0; i < n; ++i) {
      const auto x = static_cast<float>(i % 2003) - 1001.0f;
      params[i] = x * 1e-3f;
      grads[i] = x * 1e-5f;
    }
  }
  std::vector<float> params, grads, exp_avg, exp_avg_sq;
};

constexpr double kAdamBytesPerParam = 28.0;

void BM_adamw_reference(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  AdamArrays a(n);
  const AdamWScalars scalars = adamw_scalars(AdamWConfig{}, 10);
  for (auto _ : state) {
    adamw_update(a.params, a.grads, a.exp_avg, a.exp_avg_sq, scalars);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(kAdamBytesPerParam * n) * state.iterations());
}
BENCHMARK(BM_adamw_reference)->Arg(1 << 16)->Arg(1 << 22)->Arg(50'000'000)->UseRealTime();

void BM_adamw_fused(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  const auto threads = static_cast<int>(state.range(1));
  AdamArrays a(n);
  const AdamWScalars scalars = adamw_scalars(AdamWConfig{}, 10);
  for (auto _ : state) {
    adamw_update_fused(a.params, a.grads, a.exp_avg, a.exp_avg_sq, scalars, threads);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(kAdamBytesPerParam * n) * state.iterations());
}
BENCHMARK(BM_adamw_fused)->ArgsProduct({{1 << 16, 1 << 22, 50'000'000}, {1, 2, 4}})->UseRealTime();

void BM_gelu_forward(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  CpuDevice device;
  std::vector<float> x(n), y(n);
  for (std::size_t i = 0; i < n; ++i) x[i] = std::sin(static_cast<float>(i)) * 3.0f;
  for (auto _ : state) {
    device.gelu_forward(x, y);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(8 * n) * state.iterations());
}
BENCHMARK(BM_gelu_forward)->Arg(1 << 16)->Arg(1 << 20);

// GPT-2's tanh GELU, forward and backward, on one thread (the MLP's 4C activations of a step
// are millions of elements).
void BM_gelu_tanh(benchmark::State& state) {
  const auto n = static_cast<std::size_t>(state.range(0));
  CpuDevice device(1);
  std::vector<float> x(n), dy(n), y(n), dx(n);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = std::sin(static_cast<float>(i)) * 3.0f;
    dy[i] = std::cos(static_cast<float>(i));
  }
  for (auto _ : state) {
    if (state.range(1) == 0) {
      device.gelu_tanh_forward(x, y);
    } else {
      device.gelu_tanh_backward(x, dy, dx);
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(n) * state.iterations());
}
BENCHMARK(BM_gelu_tanh)->ArgsProduct({{1 << 20}, {0, 1}})->ArgNames({"elems", "backward"});

// y[rows, out] = x[rows, in] w[out, in]^T + b: 2 * rows * in * out flops, counted as items.
void BM_linear_forward(benchmark::State& state) {
  const std::int64_t rows = state.range(0);
  const std::int64_t in = state.range(1);
  const std::int64_t out = state.range(2);
  CpuDevice device;
  std::vector<float> x(static_cast<std::size_t>(rows * in), 0.5f);
  std::vector<float> w(static_cast<std::size_t>(out * in), 0.25f);
  std::vector<float> b(static_cast<std::size_t>(out), 1.0f);
  std::vector<float> y(static_cast<std::size_t>(rows * out));
  for (auto _ : state) {
    device.linear_forward(x, w, b, y, rows, in, out);
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(2 * rows * in * out * state.iterations());
}
BENCHMARK(BM_linear_forward)->Args({512, 64, 256})->Args({1024, 768, 768});

void BM_reduce_rank_order(benchmark::State& state) {
  const auto world = static_cast<std::size_t>(state.range(0));
  const auto n = static_cast<std::size_t>(state.range(1));
  std::vector<std::vector<float>> ranks(world, std::vector<float>(n, 1.0f));
  std::vector<const void*> inputs;
  for (const auto& rank : ranks) inputs.push_back(rank.data());
  std::vector<float> out(n);
  for (auto _ : state) {
    reduce_rank_order(inputs, out.data(), n, DType::F32, ReduceOp::Sum);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<std::int64_t>((world + 1) * 4 * n) * state.iterations());
}
BENCHMARK(BM_reduce_rank_order)->ArgsProduct({{2, 8}, {8192, 1 << 22}});

}  // namespace
}  // namespace zl
