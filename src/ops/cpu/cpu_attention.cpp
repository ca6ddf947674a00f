// cpu_attention.cpp — causal multi-head self-attention on the CPU, forward and backward, as
// plain loops per (batch row, head, query position). Dot products, the softmax and every
// gradient sum run in double in a fixed order and are rounded once to float, so the bits never
// depend on threads or addresses. The probabilities are kept from forward for backward
// ([B, heads, T, T], llm.c's layout); flash-style recomputation would trade them for time.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/cpu_device.hpp"
#include "ops/cpu/cpu_kernel_support.hpp"

namespace zl {

void CpuDevice::do_attention_forward(std::span<const float> qkv, std::span<float> probs,
                                     std::span<float> out, std::int64_t batch, std::int64_t seq_len,
                                     std::int64_t channels, std::int64_t heads) {
  const std::int64_t T = seq_len, C = channels, D = C / heads;  // heads divide C: Device checked
  const double scale = attention_scale(D);
  std::vector<double> scores(static_cast<std::size_t>(T));
  std::vector<double> acc(static_cast<std::size_t>(D));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t t = 0; t < T; ++t) {
        // q_t, k_s, v_s are [D] slices of qkv rows; p_t is row t of this head's probs [T, T].
        const float* q = qkv.data() + (b * T + t) * 3 * C + h * D;
        float* p = probs.data() + ((b * heads + h) * T + t) * T;
        double max_score = -std::numeric_limits<double>::infinity();
        for (std::int64_t s = 0; s <= t; ++s) {
          const float* k = qkv.data() + (b * T + s) * 3 * C + C + h * D;
          double dot = 0.0;
          for (std::int64_t d = 0; d < D; ++d) dot += static_cast<double>(q[d]) * k[d];
          scores[s] = dot * scale;
          max_score = std::max(max_score, scores[s]);
        }
        // Subtracting the max keeps every exp in (0, 1]; the causal mask is s <= t.
        double exp_sum = 0.0;
        for (std::int64_t s = 0; s <= t; ++s) exp_sum += std::exp(scores[s] - max_score);
        for (std::int64_t s = 0; s <= t; ++s)
          p[s] = static_cast<float>(std::exp(scores[s] - max_score) / exp_sum);
        for (std::int64_t s = t + 1; s < T; ++s) p[s] = 0.0f;
        // out_t [D] = sum_s p_ts v_s, with the probabilities as stored (backward uses them too).
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::int64_t s = 0; s <= t; ++s) {
          const float* v = qkv.data() + (b * T + s) * 3 * C + 2 * C + h * D;
          for (std::int64_t d = 0; d < D; ++d) acc[d] += static_cast<double>(p[s]) * v[d];
        }
        float* o = out.data() + (b * T + t) * C + h * D;
        for (std::int64_t d = 0; d < D; ++d) o[d] = static_cast<float>(acc[d]);
      }
    }
  }
}

void CpuDevice::do_attention_backward(std::span<const float> qkv, std::span<const float> probs,
                                      std::span<const float> dout, std::span<float> dqkv,
                                      std::int64_t batch, std::int64_t seq_len,
                                      std::int64_t channels, std::int64_t heads) {
  const std::int64_t T = seq_len, C = channels, D = C / heads;  // heads divide C: Device checked
  const double scale = attention_scale(D);
  std::vector<double> dprobs(static_cast<std::size_t>(T));
  std::vector<double> dq(static_cast<std::size_t>(D));
  // dk and dv of this head [T, D]: every later query adds to them, so they are summed over t
  // in double and written once.
  std::vector<double> dk(static_cast<std::size_t>(T * D)), dv(static_cast<std::size_t>(T * D));
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t h = 0; h < heads; ++h) {
      std::fill(dk.begin(), dk.end(), 0.0);
      std::fill(dv.begin(), dv.end(), 0.0);
      for (std::int64_t t = 0; t < T; ++t) {
        const float* q = qkv.data() + (b * T + t) * 3 * C + h * D;
        const float* p = probs.data() + ((b * heads + h) * T + t) * T;
        const float* grad_out = dout.data() + (b * T + t) * C + h * D;
        // dprobs_ts = dout_t . v_s, and the softmax backward's shared term sum_s p_ts dprobs_ts.
        double weighted = 0.0;
        for (std::int64_t s = 0; s <= t; ++s) {
          const float* v = qkv.data() + (b * T + s) * 3 * C + 2 * C + h * D;
          double dot = 0.0;
          for (std::int64_t d = 0; d < D; ++d) dot += static_cast<double>(grad_out[d]) * v[d];
          dprobs[s] = dot;
          weighted += p[s] * dot;
        }
        std::fill(dq.begin(), dq.end(), 0.0);
        for (std::int64_t s = 0; s <= t; ++s) {
          const float* k = qkv.data() + (b * T + s) * 3 * C + C + h * D;
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
