// adamw_fused.cpp — the fused AdamW kernel: the reference loop of adamw.cpp written so the
// compiler vectorizes it, built per instruction set, and run over chunks on std::threads.
//
// Why the bits match the reference: this file builds, like every file, with -ffp-contract=off
// and without fast-math, so the vector code does the same IEEE multiplies, adds, divides and
// square roots (each correctly rounded, in SSE, AVX2 and AVX-512 alike) in the same order per
// element. It adds -fno-math-errno (src/CMakeLists.txt) because errno is the one thing that keeps
// GCC from vectorizing std::sqrt; a negative v gives NaN either way, so no result changes.
#include "optim/adamw_fused.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/error.hpp"

namespace zl {

namespace {

// Chunk sizes are multiples of this, so each thread's stores start on their own cache line when
// the arrays do.
constexpr std::size_t kChunkAlignElems = 64;

// One chunk of n elements: the loop of adamw_update(), operation for operation. Inlined into one
// function per instruction set below, where the compiler vectorizes it for that set.
[[gnu::always_inline]] inline void update_loop(float* __restrict params,
                                               const float* __restrict grads,
                                               float* __restrict exp_avg,
                                               float* __restrict exp_avg_sq, std::size_t n,
                                               const AdamWScalars& s) {
  const float neg_step_size = -s.step_size;
  for (std::size_t i = 0; i < n; ++i) {
    const float g = grads[i];
    const float m = exp_avg[i] * s.beta1 + s.one_minus_beta1 * g;
    const float v = exp_avg_sq[i] * s.beta2 + s.one_minus_beta2 * (g * g);
    const float denom = std::sqrt(v) / s.bias2_sqrt + s.eps;
    params[i] = params[i] * s.decay + neg_step_size * (m / denom);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

using ChunkFn = void (*)(float*, const float*, float*, float*, std::size_t, const AdamWScalars&);

// Baseline: SSE2 on x86-64, whatever the target offers elsewhere.
void update_baseline(float* params, const float* grads, float* exp_avg, float* exp_avg_sq,
                     std::size_t n, const AdamWScalars& s) {
  update_loop(params, grads, exp_avg, exp_avg_sq, n, s);
}

#if defined(__x86_64__) && defined(__GNUC__)
// Chosen at run time by what the CPU supports: plain functions and a pointer rather than
// target_clones, whose load-time resolvers crash under the thread and address sanitizers.
[[gnu::target("avx2")]] void update_avx2(float* params, const float* grads, float* exp_avg,
                                         float* exp_avg_sq, std::size_t n, const AdamWScalars& s) {
  update_loop(params, grads, exp_avg, exp_avg_sq, n, s);
}

[[gnu::target("avx512f")]] void update_avx512(float* params, const float* grads, float* exp_avg,
                                              float* exp_avg_sq, std::size_t n,
                                              const AdamWScalars& s) {
  update_loop(params, grads, exp_avg, exp_avg_sq, n, s);
}

ChunkFn pick_chunk_fn() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return update_avx512;
  if (__builtin_cpu_supports("avx2")) return update_avx2;
  return update_baseline;
}
#else
ChunkFn pick_chunk_fn() {
  return update_baseline;
}
#endif

int parse_threads(const char* value) {
  const std::string text(value);
  if (text == "auto") return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  char* end = nullptr;
  const long parsed = std::strtol(text.c_str(), &end, 10);
  ZL_CHECK(!text.empty() && end == text.c_str() + text.size() && parsed >= 1 && parsed <= 1024,
           "ZL_ADAM_THREADS='{}' is invalid: use a thread count from 1 to 1024, or 'auto'", text);
  return static_cast<int>(parsed);
}

}  // namespace

void adamw_update_fused(std::span<float> params, std::span<const float> grads,
                        std::span<float> exp_avg, std::span<float> exp_avg_sq,
                        const AdamWScalars& scalars, int threads,
                        std::size_t min_elems_per_thread) {
  const std::size_t n = params.size();
  ZL_CHECK(grads.size() == n && exp_avg.size() == n && exp_avg_sq.size() == n,
           "AdamW spans disagree: params {}, grads {}, exp_avg {}, exp_avg_sq {}", n, grads.size(),
           exp_avg.size(), exp_avg_sq.size());
  // As many chunks as threads, but none shorter than min_elems_per_thread.
  const std::size_t most_chunks =
      std::max<std::size_t>(1, n / std::max<std::size_t>(1, min_elems_per_thread));
  const std::size_t chunks = std::min<std::size_t>(std::max(threads, 1), most_chunks);
  const std::size_t per_chunk =
      ((n + chunks - 1) / chunks + kChunkAlignElems - 1) / kChunkAlignElems * kChunkAlignElems;
  static const ChunkFn update_chunk = pick_chunk_fn();
  auto run_chunk = [&](std::size_t c) {
    const std::size_t begin = std::min(n, c * per_chunk);
    const std::size_t end = std::min(n, begin + per_chunk);
    update_chunk(params.data() + begin, grads.data() + begin, exp_avg.data() + begin,
                 exp_avg_sq.data() + begin, end - begin, scalars);
  };
  // jthreads join when destroyed, so a failed start cannot leave a running worker behind.
  std::vector<std::jthread> workers;
  workers.reserve(chunks - 1);
  for (std::size_t c = 1; c < chunks; ++c) workers.emplace_back(run_chunk, c);
  run_chunk(0);
}

int adam_threads() {
  static const int threads = [] {
    const char* value = std::getenv("ZL_ADAM_THREADS");
    return value == nullptr ? 1 : parse_threads(value);
  }();
  return threads;
}

}  // namespace zl
