// cpu_attention.cpp — causal multi-head self-attention on the CPU, forward and backward, as plain
// loops per (batch row, head, query position), with no T x T tensor kept: forward keeps two
// floats per query row (the largest score m and the sum of exponentials l, both rounded to float)
// and backward rebuilds each row's probabilities from q, k and them, exactly as forward made them.
// Memory grows with T, not T². Dot products (summed over d in order, vectorized across keys), the
// softmax and every gradient sum run in double in a fixed order and are rounded once to float, so
// the bits never depend on threads or addresses; this is the specification the CUDA kernels are
// tested against. Each (batch row, head) is one task for
// the device's threads: the tasks write disjoint elements. A head's loops are compiled for the
// baseline, AVX2 and AVX-512 (cpu_isa.hpp picks one): without FMA contraction (-ffp-contract=off)
// and without fast-math the vector code does the same IEEE operations in the same order, so all
// three give the same bits.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/cpu_device.hpp"
#include "ops/cpu/cpu_isa.hpp"
#include "ops/cpu/cpu_thread_pool.hpp"

namespace zl {

namespace {

// out[s] = x . rows_s for s < count, where rows_t is the head's [D, T] transpose of the rows (k or
// v): each product in double, summed over d = 0, 1, ..., D - 1 in order. The loop over s is
// innermost and contiguous, so it vectorizes across keys without changing any sum's order.
[[gnu::always_inline]] inline void dots(const float* x, const float* rows_t, std::int64_t T,
                                        std::int64_t D, std::int64_t count, double* out) {
  std::fill(out, out + count, 0.0);
  for (std::int64_t d = 0; d < D; ++d) {
    const auto xd = static_cast<double>(x[d]);
    const float* row = rows_t + d * T;
    for (std::int64_t s = 0; s < count; ++s) out[s] += xd * row[s];
  }
}

// One head of one sequence: row t of q, k or v is a [D] slice of qkv row t; the task's scratch.
struct Head {
  const float* qkv;  // the sequence's first qkv row
  std::int64_t T, C, D, h;
  double scale;
  double* scores;  // [T]
  float* p;        // [T]
  double* acc;     // [D]: out_t (forward) or dq_t (backward)
  double* dprobs;  // [T] (backward)
  double* dk;      // [T, D] (backward)
  double* dv;      // [T, D] (backward)
  float* k_t;      // [D, T]: k transposed
  float* v_t;      // [D, T]: v transposed (backward)
  const float* q(std::int64_t t) const { return qkv + t * 3 * C + h * D; }
  const float* k(std::int64_t s) const { return qkv + s * 3 * C + C + h * D; }
  const float* v(std::int64_t s) const { return qkv + s * 3 * C + 2 * C + h * D; }
};

// A probability from its exponential exp(z_s - m) and the row's l: in double, rounded once. The
// one definition forward and backward share.
[[gnu::always_inline]] inline float probability(double exp_term, float l) {
  return static_cast<float>(exp_term / static_cast<double>(l));
}

// rows_t[d, s] = row(s)[d]: the head's k or v as [D, T].
template <typename Row>
[[gnu::always_inline]] inline void transpose(const Head& head, Row row, float* rows_t) {
  for (std::int64_t s = 0; s < head.T; ++s) {
    const float* values = row(s);
    for (std::int64_t d = 0; d < head.D; ++d) rows_t[d * head.T + s] = values[d];
  }
}

// z_s = (q_t . k_s) * scale for s <= t, into head.scores.
[[gnu::always_inline]] inline void scores_of(const Head& head, std::int64_t t) {
  dots(head.q(t), head.k_t, head.T, head.D, t + 1, head.scores);
  for (std::int64_t s = 0; s <= t; ++s) head.scores[s] *= head.scale;
}

// Forward of one head: stats rows [T, 2] and out rows (stride C) of this head.
[[gnu::always_inline]] inline void forward_head(const Head& head, float* stats, float* out) {
  const std::int64_t D = head.D;
  transpose(
      head, [&](std::int64_t s) { return head.k(s); }, head.k_t);
  for (std::int64_t t = 0; t < head.T; ++t) {
    scores_of(head, t);
    // The causal mask is s <= t; subtracting the max keeps every exp near (0, 1].
    double max_score = head.scores[0];
    for (std::int64_t s = 1; s <= t; ++s) max_score = std::max(max_score, head.scores[s]);
    const auto m = static_cast<float>(max_score);
    double exp_sum = 0.0;
    for (std::int64_t s = 0; s <= t; ++s) {
      head.scores[s] = std::exp(head.scores[s] - m);  // from here on the exponentials
      exp_sum += head.scores[s];
    }
    const auto l = static_cast<float>(exp_sum);
    stats[t * kAttentionStatsPerRow] = m;
    stats[t * kAttentionStatsPerRow + 1] = l;
    for (std::int64_t s = 0; s <= t; ++s) head.p[s] = probability(head.scores[s], l);
    // out_t [D] = sum_s p_ts v_s, with the probabilities backward rebuilds.
    std::fill(head.acc, head.acc + D, 0.0);
    for (std::int64_t s = 0; s <= t; ++s) {
      const float* v = head.v(s);
      const auto p = static_cast<double>(head.p[s]);
      for (std::int64_t d = 0; d < D; ++d) head.acc[d] += p * v[d];
    }
    float* o = out + t * head.C;
    for (std::int64_t d = 0; d < D; ++d) o[d] = static_cast<float>(head.acc[d]);
  }
}

// Backward of one query row t: dq_t written to dq_out, its terms added to head.dk and head.dv.
[[gnu::always_inline]] inline void backward_row(const Head& head, std::int64_t t,
                                                const float* row_stats, const float* grad_out,
                                                float* dq_out) {
  const std::int64_t D = head.D;
  const float* q = head.q(t);
  scores_of(head, t);
  for (std::int64_t s = 0; s <= t; ++s) {
    head.p[s] = probability(std::exp(head.scores[s] - row_stats[0]), row_stats[1]);
  }
  // dprobs_ts = dout_t . v_s, and the softmax backward's shared term sum_s p_ts dprobs_ts.
  dots(grad_out, head.v_t, head.T, D, t + 1, head.dprobs);
  double weighted = 0.0;
  for (std::int64_t s = 0; s <= t; ++s) weighted += head.p[s] * head.dprobs[s];
  std::fill(head.acc, head.acc + D, 0.0);
  for (std::int64_t s = 0; s <= t; ++s) {
    const float* k = head.k(s);
    const double dscore =
        head.p[s] * (head.dprobs[s] - weighted);  // d loss / d (q_t . k_s * scale)
    const auto p = static_cast<double>(head.p[s]);
    double* dk = head.dk + s * D;
    double* dv = head.dv + s * D;
    for (std::int64_t d = 0; d < D; ++d) {
      head.acc[d] += dscore * k[d];
      dk[d] += dscore * q[d];
      dv[d] += p * grad_out[d];
    }
  }
  for (std::int64_t d = 0; d < D; ++d) dq_out[d] = static_cast<float>(head.acc[d] * head.scale);
}

// Backward of one head: dk and dv [T, D] are summed over t in double (every later query adds to
// them) and written once.
[[gnu::always_inline]] inline void backward_head(const Head& head, const float* stats,
                                                 const float* dout, float* dqkv) {
  const std::int64_t T = head.T, C = head.C, D = head.D;
  transpose(
      head, [&](std::int64_t s) { return head.k(s); }, head.k_t);
  transpose(
      head, [&](std::int64_t s) { return head.v(s); }, head.v_t);
  std::fill(head.dk, head.dk + T * D, 0.0);
  std::fill(head.dv, head.dv + T * D, 0.0);
  for (std::int64_t t = 0; t < T; ++t) {
    backward_row(head, t, stats + t * kAttentionStatsPerRow, dout + t * C, dqkv + t * 3 * C);
  }
  for (std::int64_t s = 0; s < T; ++s) {
    float* dk_out = dqkv + s * 3 * C + C;
    float* dv_out = dk_out + C;
    for (std::int64_t d = 0; d < D; ++d) {
      dk_out[d] = static_cast<float>(head.dk[s * D + d] * head.scale);
      dv_out[d] = static_cast<float>(head.dv[s * D + d]);
    }
  }
}

using ForwardFn = void (*)(const Head&, float*, float*);
using BackwardFn = void (*)(const Head&, const float*, const float*, float*);

void forward_baseline(const Head& head, float* stats, float* out) {
  forward_head(head, stats, out);
}
void backward_baseline(const Head& head, const float* stats, const float* dout, float* dqkv) {
  backward_head(head, stats, dout, dqkv);
}

#if defined(__x86_64__) && defined(__GNUC__)
[[gnu::target("avx2")]] void forward_avx2(const Head& head, float* stats, float* out) {
  forward_head(head, stats, out);
}
[[gnu::target("avx2")]] void backward_avx2(const Head& head, const float* stats, const float* dout,
                                           float* dqkv) {
  backward_head(head, stats, dout, dqkv);
}
[[gnu::target("avx512f")]] void forward_avx512(const Head& head, float* stats, float* out) {
  forward_head(head, stats, out);
}
[[gnu::target("avx512f")]] void backward_avx512(const Head& head, const float* stats,
                                                const float* dout, float* dqkv) {
  backward_head(head, stats, dout, dqkv);
}
#endif

ForwardFn forward_fn() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (cpu::widest_isa() == cpu::Isa::Avx512) return forward_avx512;
  if (cpu::widest_isa() == cpu::Isa::Avx2) return forward_avx2;
#endif
  return forward_baseline;
}

BackwardFn backward_fn() {
#if defined(__x86_64__) && defined(__GNUC__)
  if (cpu::widest_isa() == cpu::Isa::Avx512) return backward_avx512;
  if (cpu::widest_isa() == cpu::Isa::Avx2) return backward_avx2;
#endif
  return backward_baseline;
}

}  // namespace

void CpuDevice::do_attention_forward(std::span<const float> qkv, std::span<float> stats,
                                     std::span<float> out, std::int64_t batch, std::int64_t seq_len,
                                     std::int64_t channels, std::int64_t heads) {
  const std::int64_t T = seq_len, C = channels, D = C / heads;  // heads divide C: Device checked
  static const ForwardFn forward = forward_fn();
  pool().run(batch * heads, [&](std::int64_t task) {
    const std::int64_t b = task / heads, h = task % heads;
    std::vector<double> scores(static_cast<std::size_t>(T)), acc(static_cast<std::size_t>(D));
    std::vector<float> p(static_cast<std::size_t>(T)), k_t(static_cast<std::size_t>(T * D));
    const Head head{.qkv = qkv.data() + b * T * 3 * C,
                    .T = T,
                    .C = C,
                    .D = D,
                    .h = h,
                    .scale = attention_scale(D),
                    .scores = scores.data(),
                    .p = p.data(),
                    .acc = acc.data(),
                    .dprobs = nullptr,
                    .dk = nullptr,
                    .dv = nullptr,
                    .k_t = k_t.data(),
                    .v_t = nullptr};
    forward(head, stats.data() + task * T * kAttentionStatsPerRow, out.data() + b * T * C + h * D);
  });
}

void CpuDevice::do_attention_backward(std::span<const float> qkv, std::span<const float> stats,
                                      std::span<const float> dout, std::span<float> dqkv,
                                      std::int64_t batch, std::int64_t seq_len,
                                      std::int64_t channels, std::int64_t heads) {
  const std::int64_t T = seq_len, C = channels, D = C / heads;  // heads divide C: Device checked
  static const BackwardFn backward = backward_fn();
  pool().run(batch * heads, [&](std::int64_t task) {
    const std::int64_t b = task / heads, h = task % heads;
    const auto rows = static_cast<std::size_t>(T);
    std::vector<double> scores(rows), dprobs(rows), acc(static_cast<std::size_t>(D));
    std::vector<double> dk(rows * static_cast<std::size_t>(D)), dv(dk.size());
    std::vector<float> p(rows), k_t(dk.size()), v_t(dk.size());
    const Head head{.qkv = qkv.data() + b * T * 3 * C,
                    .T = T,
                    .C = C,
                    .D = D,
                    .h = h,
                    .scale = attention_scale(D),
                    .scores = scores.data(),
                    .p = p.data(),
                    .acc = acc.data(),
                    .dprobs = dprobs.data(),
                    .dk = dk.data(),
                    .dv = dv.data(),
                    .k_t = k_t.data(),
                    .v_t = v_t.data()};
    backward(head, stats.data() + task * T * kAttentionStatsPerRow, dout.data() + b * T * C + h * D,
             dqkv.data() + b * T * 3 * C + h * D);
  });
}

}  // namespace zl
