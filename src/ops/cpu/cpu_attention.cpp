// cpu_attention.cpp — causal multi-head self-attention on the CPU, forward and backward, as plain
// loops per (batch row, head, query position), with no T x T tensor kept: forward keeps two
// floats per query row (the largest score m and the sum of exponentials l, both rounded to float)
// and backward rebuilds each row's probabilities from q, k and them, exactly as forward made them.
// Memory grows with T, not T². Dot products, the softmax and every gradient sum run in double in a
// fixed order and are rounded once to float, so the bits never depend on threads or addresses; this
// is the specification the CUDA kernels are tested against.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/cpu_device.hpp"
#include "ops/cpu/cpu_kernel_support.hpp"

namespace zl {

namespace {

// a . b over D elements in double: four partial sums over d = 4i + j, combined as
// (s0 + s1) + (s2 + s3), then the last D % 4 terms in order. A fixed order, and four independent
// chains the CPU can overlap.
double dot(const float* a, const float* b, std::int64_t D) {
  double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
  std::int64_t d = 0;
  for (; d + 4 <= D; d += 4) {
    s0 += static_cast<double>(a[d]) * b[d];
    s1 += static_cast<double>(a[d + 1]) * b[d + 1];
    s2 += static_cast<double>(a[d + 2]) * b[d + 2];
    s3 += static_cast<double>(a[d + 3]) * b[d + 3];
  }
  double sum = (s0 + s1) + (s2 + s3);
  for (; d < D; ++d) sum += static_cast<double>(a[d]) * b[d];
  return sum;
}

// One head of one sequence: row t of q, k or v is a [D] slice of qkv row t.
struct Head {
  const float* qkv;  // the sequence's first qkv row
  std::int64_t C, D, h;
  const float* q(std::int64_t t) const { return qkv + t * 3 * C + h * D; }
  const float* k(std::int64_t s) const { return qkv + s * 3 * C + C + h * D; }
  const float* v(std::int64_t s) const { return qkv + s * 3 * C + 2 * C + h * D; }
};

// A probability from its exponential exp(z_s - m) and the row's l: in double, rounded once. The
// one definition forward and backward share.
float probability(double exp_term, float l) {
  return static_cast<float>(exp_term / static_cast<double>(l));
}

// z_s = q_t . k_s * scale for s <= t.
void scores_of(const Head& head, std::int64_t t, double scale, std::vector<double>& scores) {
  const float* q = head.q(t);
  for (std::int64_t s = 0; s <= t; ++s) scores[s] = dot(q, head.k(s), head.D) * scale;
}

}  // namespace

void CpuDevice::do_attention_forward(std::span<const float> qkv, std::span<float> stats,
                                     std::span<float> out, std::int64_t batch, std::int64_t seq_len,
                                     std::int64_t channels, std::int64_t heads) {
  const std::int64_t T = seq_len, C = channels, D = C / heads;  // heads divide C: Device checked
  const double scale = attention_scale(D);
  std::vector<double> scores(static_cast<std::size_t>(T));
  std::vector<float> p(static_cast<std::size_t>(T));
  std::vector<double> acc(static_cast<std::size_t>(D));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const Head head{qkv.data() + b * T * 3 * C, C, D, h};
      for (std::int64_t t = 0; t < T; ++t) {
        scores_of(head, t, scale, scores);
        // The causal mask is s <= t; subtracting the max keeps every exp near (0, 1].
        const double max_score = *std::max_element(scores.begin(), scores.begin() + t + 1);
        const auto m = static_cast<float>(max_score);
        double exp_sum = 0.0;
        for (std::int64_t s = 0; s <= t; ++s) {
          scores[s] = std::exp(scores[s] - m);  // from here on the exponentials
          exp_sum += scores[s];
        }
        const auto l = static_cast<float>(exp_sum);
        float* row_stats = stats.data() + ((b * heads + h) * T + t) * kAttentionStatsPerRow;
        row_stats[0] = m;
        row_stats[1] = l;
        for (std::int64_t s = 0; s <= t; ++s) p[s] = probability(scores[s], l);
        // out_t [D] = sum_s p_ts v_s, with the probabilities backward rebuilds.
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::int64_t s = 0; s <= t; ++s) {
          const float* v = head.v(s);
          for (std::int64_t d = 0; d < D; ++d) acc[d] += static_cast<double>(p[s]) * v[d];
        }
        float* o = out.data() + (b * T + t) * C + h * D;
        for (std::int64_t d = 0; d < D; ++d) o[d] = static_cast<float>(acc[d]);
      }
    }
  }
}

void CpuDevice::do_attention_backward(std::span<const float> qkv, std::span<const float> stats,
                                      std::span<const float> dout, std::span<float> dqkv,
                                      std::int64_t batch, std::int64_t seq_len,
                                      std::int64_t channels, std::int64_t heads) {
  const std::int64_t T = seq_len, C = channels, D = C / heads;  // heads divide C: Device checked
  const double scale = attention_scale(D);
  std::vector<double> scores(static_cast<std::size_t>(T));
  std::vector<float> p(static_cast<std::size_t>(T));
  std::vector<double> dprobs(static_cast<std::size_t>(T));
  std::vector<double> dq(static_cast<std::size_t>(D));
  // dk and dv of this head [T, D]: every later query adds to them, so they are summed over t
  // in double and written once.
  std::vector<double> dk(static_cast<std::size_t>(T * D)), dv(static_cast<std::size_t>(T * D));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < heads; ++h) {
      const Head head{qkv.data() + b * T * 3 * C, C, D, h};
      std::fill(dk.begin(), dk.end(), 0.0);
      std::fill(dv.begin(), dv.end(), 0.0);
      for (std::int64_t t = 0; t < T; ++t) {
        const float* q = head.q(t);
        const float* row_stats = stats.data() + ((b * heads + h) * T + t) * kAttentionStatsPerRow;
        scores_of(head, t, scale, scores);
        for (std::int64_t s = 0; s <= t; ++s) {
          p[s] = probability(std::exp(scores[s] - row_stats[0]), row_stats[1]);
        }
        const float* grad_out = dout.data() + (b * T + t) * C + h * D;
        // dprobs_ts = dout_t . v_s, and the softmax backward's shared term sum_s p_ts dprobs_ts.
        double weighted = 0.0;
        for (std::int64_t s = 0; s <= t; ++s) {
          dprobs[s] = dot(grad_out, head.v(s), D);
          weighted += p[s] * dprobs[s];
        }
        std::fill(dq.begin(), dq.end(), 0.0);
        for (std::int64_t s = 0; s <= t; ++s) {
          const float* k = head.k(s);
          const double dscore = p[s] * (dprobs[s] - weighted);  // d loss / d (q_t . k_s * scale)
          for (std::int64_t d = 0; d < D; ++d) {
            dq[d] += dscore * k[d];
            dk[s * D + d] += dscore * q[d];
            dv[s * D + d] += static_cast<double>(p[s]) * grad_out[d];
          }
        }
        float* dq_out = dqkv.data() + (b * T + t) * 3 * C + h * D;
        for (std::int64_t d = 0; d < D; ++d) dq_out[d] = static_cast<float>(dq[d] * scale);
      }
      for (std::int64_t s = 0; s < T; ++s) {
        float* dk_out = dqkv.data() + (b * T + s) * 3 * C + C + h * D;
        float* dv_out = dk_out + C;
        for (std::int64_t d = 0; d < D; ++d) {
          dk_out[d] = static_cast<float>(dk[s * D + d] * scale);
          dv_out[d] = static_cast<float>(dv[s * D + d]);
        }
      }
    }
  }
}

}  // namespace zl
