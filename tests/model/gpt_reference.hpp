// gpt_reference.hpp — the answer key for the GPT tests: GPT-2's ops and its whole loss written
// again in double, straight from the formulas in device.hpp, with no attention to speed. Finite
// differences of these functions are the gradients the float kernels are checked against.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <span>
#include <vector>

#include "core/rng.hpp"
#include "grad_check.hpp"
#include "model/gpt_config.hpp"
#include "model/model.hpp"

namespace zl::test {

// Tolerances of the kernel checks, as in cpu_device_test.cpp: float results of short sums carry
// errors of order 1e-7 (these kernels sum in double and round once, so less); central differences
// with h = 1e-6 on smooth double functions are good to ~1e-10. 1e-6 + 1e-5 |g| is ten times the
// float error, while a wrong term, sign or scale is off by the gradient's own size (>= 1e-3 in
// these tests).
inline constexpr double kOpStep = 1e-6;
inline constexpr double kOpAbsTol = 1e-6;
inline constexpr double kOpRelTol = 1e-5;

/// Deterministic test values scale * N(0, 1) + shift; `stream` keeps different tensors apart.
inline std::vector<float> random_normals(std::uint64_t stream, std::int64_t elems,
                                         float scale = 1.0f, float shift = 0.0f) {
  std::vector<float> values(static_cast<std::size_t>(elems));
  for (std::size_t i = 0; i < values.size(); ++i)
    values[i] = scale * standard_normal(7, stream, i) + shift;
  return values;
}

/// sum_i weights[i] * values[i] in double: a scalar loss whose gradient wrt `values` is `weights`.
inline double weighted_sum(std::span<const float> weights, std::span<const double> values) {
  double sum = 0.0;
  for (std::size_t i = 0; i < values.size(); ++i) sum += weights[i] * values[i];
  return sum;
}

/// y[rows, out] = x[rows, in] w[in, out] + b[out] (Hugging Face Conv1D), in double.
inline std::vector<double> ref_conv1d(std::span<const double> x, std::span<const double> w,
                                      std::span<const double> b, std::int64_t rows, std::int64_t in,
                                      std::int64_t out) {
  std::vector<double> y(static_cast<std::size_t>(rows * out));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t o = 0; o < out; ++o) {
      double sum = b[o];
      for (std::int64_t i = 0; i < in; ++i) sum += x[r * in + i] * w[i * out + o];
      y[r * out + o] = sum;
    }
  }
  return y;
}

/// LayerNorm of each row of x[rows, C] with eps 1e-5 and the biased variance, in double.
inline std::vector<double> ref_layernorm(std::span<const double> x, std::span<const double> weight,
                                         std::span<const double> bias, std::int64_t rows,
                                         std::int64_t C) {
  std::vector<double> y(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    double mean = 0.0, var = 0.0;
    for (std::int64_t c = 0; c < C; ++c) mean += x[r * C + c] / static_cast<double>(C);
    for (std::int64_t c = 0; c < C; ++c) {
      var += (x[r * C + c] - mean) * (x[r * C + c] - mean) / static_cast<double>(C);
    }
    for (std::int64_t c = 0; c < C; ++c)
      y[r * C + c] = (x[r * C + c] - mean) / std::sqrt(var + 1e-5) * weight[c] + bias[c];
  }
  return y;
}

/// GPT-2's GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in double.
inline double ref_gelu_tanh(double x) {
  return 0.5 * x *
         (1.0 + std::tanh(std::sqrt(2.0 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}

/// Causal multi-head self-attention of qkv[B, T, 3C] (q | k | v), heads of D = C / heads
/// channels, in double: out[B, T, C].
inline std::vector<double> ref_attention(std::span<const double> qkv, std::int64_t B,
                                         std::int64_t T, std::int64_t C, std::int64_t heads) {
  const std::int64_t D = C / heads;
  std::vector<double> out(static_cast<std::size_t>(B * T * C), 0.0);
  const auto at = [&](std::int64_t b, std::int64_t t, std::int64_t part, std::int64_t h,
                      std::int64_t d) { return qkv[(b * T + t) * 3 * C + part * C + h * D + d]; };
  for (std::int64_t b = 0; b < B; ++b) {
    for (std::int64_t h = 0; h < heads; ++h) {
      for (std::int64_t t = 0; t < T; ++t) {
        std::vector<double> weights(static_cast<std::size_t>(t + 1));
        for (std::int64_t s = 0; s <= t; ++s) {
          double dot = 0.0;
          for (std::int64_t d = 0; d < D; ++d) dot += at(b, t, 0, h, d) * at(b, s, 1, h, d);
          weights[s] = dot / std::sqrt(static_cast<double>(D));
        }
        const double max_score = *std::max_element(weights.begin(), weights.end());
        double total = 0.0;
        for (auto& w : weights) total += (w = std::exp(w - max_score));
        for (std::int64_t s = 0; s <= t; ++s) {
          for (std::int64_t d = 0; d < D; ++d)
            out[(b * T + t) * C + h * D + d] += weights[s] / total * at(b, s, 2, h, d);
        }
      }
    }
  }
  return out;
}

/// The cut of `flat` for tensor `index` of `unit` (its parameters back to back).
inline std::span<const double> tensor_of(std::span<const double> flat, const UnitSpec& unit,
                                         std::size_t index) {
  std::size_t offset = 0;
  for (std::size_t i = 0; i < index; ++i)
    offset += static_cast<std::size_t>(numel(unit.params[i].shape));
  return flat.subspan(offset, static_cast<std::size_t>(numel(unit.params[index].shape)));
}

/// GPT-2's logits [rows * T, vocab] for `batch`, in double; `params[u]` is unit u's flat values.
inline std::vector<double> ref_gpt_logits(const GptConfig& config,
                                          const std::vector<std::vector<double>>& params,
                                          const Batch& batch) {
  const auto units = gpt_units(config);
  const std::int64_t B = batch.rows, T = batch.features, N = B * T, C = config.n_embd;
  const std::int64_t V = config.vocab;
  const auto wte = tensor_of(params[0], units[0], 0);
  const auto wpe = tensor_of(params[0], units[0], 1);
  std::vector<double> x(static_cast<std::size_t>(N * C));
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t c = 0; c < C; ++c)
      x[n * C + c] = wte[batch.tokens[n] * C + c] + wpe[(n % T) * C + c];
  }
  for (int l = 0; l < config.n_layer; ++l) {
    const auto& unit = units[1 + l];
    const auto p = [&](std::size_t i) { return tensor_of(params[1 + l], unit, i); };
    const auto ln1 = ref_layernorm(x, p(0), p(1), N, C);
    const auto attn =
        ref_attention(ref_conv1d(ln1, p(2), p(3), N, C, 3 * C), B, T, C, config.n_head);
    const auto proj = ref_conv1d(attn, p(4), p(5), N, C, C);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += proj[i];
    auto fc = ref_conv1d(ref_layernorm(x, p(6), p(7), N, C), p(8), p(9), N, C, 4 * C);
    for (auto& v : fc) v = ref_gelu_tanh(v);
    const auto mlp = ref_conv1d(fc, p(10), p(11), N, 4 * C, C);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] += mlp[i];
  }
  const auto& last = units.back();
  const auto lnf =
      ref_layernorm(x, tensor_of(params.back(), last, 0), tensor_of(params.back(), last, 1), N, C);
  std::vector<double> logits(static_cast<std::size_t>(N * V));
  for (std::int64_t n = 0; n < N; ++n) {
    for (std::int64_t v = 0; v < V; ++v) {
      double sum = 0.0;
      for (std::int64_t c = 0; c < C; ++c) sum += lnf[n * C + c] * wte[v * C + c];
      logits[n * V + v] = sum;
    }
  }
  return logits;
}

/// GPT-2's mean cross-entropy over every token of `batch`, in double.
inline double ref_gpt_loss(const GptConfig& config, const std::vector<std::vector<double>>& params,
                           const Batch& batch) {
  return ref_cross_entropy(ref_gpt_logits(config, params, batch), batch.y,
                           batch.rows * batch.features, config.vocab);
}

}  // namespace zl::test
