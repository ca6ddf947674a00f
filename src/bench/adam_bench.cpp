// adam_bench.cpp — times adamw_update_fused on N parameters and the STREAM triad over fp64 arrays
// of the same length, both split over the same threads and alternating in one run, so their ratio
// is meaningful on a shared, noisy machine. Arrays are first touched by the threads that use them.
#include "bench/adam_bench.hpp"

#include <algorithm>
#include <functional>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "bench/timing.hpp"
#include "core/error.hpp"
#include "optim/adamw.hpp"
#include "optim/adamw_fused.hpp"

namespace zl::bench {

namespace {

// Runs fn(begin, end) over `threads` equal parts of [0, n), the calling thread taking part 0.
void parallel_parts(std::size_t n, int threads,
                    const std::function<void(std::size_t, std::size_t)>& fn) {
  const auto parts = static_cast<std::size_t>(std::max(threads, 1));
  const std::size_t per_part = (n + parts - 1) / parts;
  auto run_part = [&](std::size_t p) {
    const std::size_t begin = std::min(n, p * per_part);
    fn(begin, std::min(n, begin + per_part));
  };
  std::vector<std::jthread> helpers;
  for (std::size_t p = 1; p < parts; ++p) helpers.emplace_back(run_part, p);
  run_part(0);
}

void triad(double* __restrict a, const double* __restrict b, const double* __restrict c,
           double scalar, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) a[i] = b[i] + scalar * c[i];
}

// An uninitialized array, so the first touch happens in the threads that fill it.
template <class T>
std::unique_ptr<T[]> untouched(std::size_t elems) {
  return std::make_unique_for_overwrite<T[]>(elems);
}

int resolve_threads(int threads) {
  if (threads > 0) return threads;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

}  // namespace

AdamBenchResult run_adam_bench(const AdamBenchOptions& options) {
  ZL_CHECK(options.params_elems > 0, "--params {} is invalid: give a positive count",
           options.params_elems);
  ZL_CHECK(options.repeats > 0, "--repeats {} is invalid: give a positive count", options.repeats);
  AdamBenchResult result;
  result.params_elems = options.params_elems;
  result.threads = resolve_threads(options.threads);
  result.repeats = options.repeats;
  const auto n = static_cast<std::size_t>(options.params_elems);

  const auto p = untouched<float>(n);
  const auto g = untouched<float>(n);
  const auto m = untouched<float>(n);
  const auto v = untouched<float>(n);
  const auto a = untouched<double>(n);
  const auto b = untouched<double>(n);
  const auto c = untouched<double>(n);
  parallel_parts(n, result.threads, [&](std::size_t begin, std::size_t end) {
    for (std::size_t i = begin; i < end; ++i) {
      const auto x = static_cast<float>(i % 2003) - 1001.0f;
      p[i] = x * 1e-3f;
      g[i] = x * 1e-5f;
      m[i] = 0.0f;
      v[i] = 0.0f;
      a[i] = 0.0;
      b[i] = 1.0;
      c[i] = 2.0;
    }
  });
  const std::span<float> params(p.get(), n), exp_avg(m.get(), n), exp_avg_sq(v.get(), n);
  const std::span<const float> grads(g.get(), n);
  const AdamWConfig config;

  // Updates and triad passes alternate, so drift on a shared machine hits both alike.
  std::vector<double> adam_ms, triad_ms;
  for (int r = 0; r <= options.repeats; ++r) {  // round 0 warms up
    const AdamWScalars scalars = adamw_scalars(config, r + 1);
    double start_ms = steady_ms();
    adamw_update_fused(params, grads, exp_avg, exp_avg_sq, scalars, result.threads);
    if (r > 0) adam_ms.push_back(steady_ms() - start_ms);
    start_ms = steady_ms();
    parallel_parts(n, result.threads, [&](std::size_t begin, std::size_t end) {
      triad(a.get() + begin, b.get() + begin, c.get() + begin, 3.0, end - begin);
    });
    if (r > 0) triad_ms.push_back(steady_ms() - start_ms);
  }
  result.ms = median_ms(adam_ms);
  result.gbps = gbps(kAdamBytesPerParam * static_cast<double>(n), result.ms);
  result.triad_gbps = gbps(kTriadBytesPerElem * static_cast<double>(n), median_ms(triad_ms));

  std::vector<double> reference_ms;
  for (int r = 0; r < options.reference_repeats; ++r) {
    const AdamWScalars scalars = adamw_scalars(config, options.repeats + 2 + r);
    const double start_ms = steady_ms();
    adamw_update(params, grads, exp_avg, exp_avg_sq, scalars);
    reference_ms.push_back(steady_ms() - start_ms);
  }
  result.reference_ms = median_ms(reference_ms);
  return result;
}

}  // namespace zl::bench
