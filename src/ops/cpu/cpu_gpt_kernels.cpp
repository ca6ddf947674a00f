// cpu_gpt_kernels.cpp — the CPU kernels GPT-2 adds to the Device table: embeddings, LayerNorm,
// Conv1D and tanh GELU (ops/gelu_tanh.hpp; causal attention: cpu_attention.cpp). Plain loops in a
// fixed order with sums in double, each result rounded once to float, cut into pieces of rows,
// columns or elements (cpu_kernels.hpp) in which every sum keeps its order, so the bits never
// depend on threads or addresses; Conv1D's products go through cpu_gemm.hpp like linear_forward.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/error.hpp"
#include "ops/column_sums.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "ops/cpu/cpu_gemm.hpp"
#include "ops/cpu/cpu_isa.hpp"
#include "ops/cpu/cpu_kernels.hpp"
#include "ops/gelu_tanh.hpp"

namespace zl {

using cpu::for_each_piece;
using cpu::rows_per_piece;

namespace {

constexpr double kLayerNormEps = 1e-5;  // torch.nn.LayerNorm's and GPT-2's default

void check_token(const char* kernel, std::int64_t token, std::int64_t row, std::int64_t position,
                 std::int64_t vocab) {
  ZL_CHECK(token >= 0 && token < vocab,
           "{}: token {} at row {}, position {} is outside the vocabulary [0, {}): use token ids "
           "below --vocab",
           kernel, token, row, position, vocab);
}

}  // namespace

void CpuDevice::do_embedding_forward(std::span<const std::int64_t> tokens,
                                     std::span<const float> wte, std::span<const float> wpe,
                                     std::span<float> x, std::int64_t batch, std::int64_t seq_len,
                                     std::int64_t channels, std::int64_t vocab) {
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t t = 0; t < seq_len; ++t) {
      const std::int64_t token = tokens[b * seq_len + t];
      check_token("embedding_forward", token, b, t, vocab);
      // x row (b, t) is [C] = wte row `token` + wpe row t
      float* out = x.data() + (b * seq_len + t) * channels;
      const float* token_row = wte.data() + token * channels;
      const float* position_row = wpe.data() + t * channels;
      for (std::int64_t c = 0; c < channels; ++c) out[c] = token_row[c] + position_row[c];
    }
  }
}

void CpuDevice::do_embedding_backward(std::span<const std::int64_t> tokens,
                                      std::span<const float> dx, std::span<float> dwte,
                                      std::span<float> dwpe, std::int64_t batch,
                                      std::int64_t seq_len, std::int64_t channels,
                                      std::int64_t vocab) {
  for (std::int64_t b = 0; b < batch; ++b) {
    for (std::int64_t t = 0; t < seq_len; ++t) {
      const std::int64_t token = tokens[b * seq_len + t];
      check_token("embedding_backward", token, b, t, vocab);
      const float* grad_row = dx.data() + (b * seq_len + t) * channels;
      float* token_row = dwte.data() + token * channels;
      float* position_row = dwpe.data() + t * channels;
      for (std::int64_t c = 0; c < channels; ++c) {
        token_row[c] += grad_row[c];
        position_row[c] += grad_row[c];
      }
    }
  }
}

void CpuDevice::do_layernorm_forward(std::span<const float> x, std::span<const float> weight,
                                     std::span<const float> bias, std::span<float> y,
                                     std::span<float> mean, std::span<float> rstd,
                                     std::int64_t rows, std::int64_t channels) {
  const auto count = static_cast<double>(channels);
  for_each_piece(pool(), rows, rows_per_piece(pool(), channels),
                 [&](std::int64_t begin, std::int64_t end) {
                   for (std::int64_t r = begin; r < end; ++r) {
                     // x row r is [C]; two passes (mean, then squared deviations) avoid E[x^2] -
                     // E[x]^2's cancellation.
                     const float* in = x.data() + r * channels;
                     double sum = 0.0;
                     for (std::int64_t c = 0; c < channels; ++c) sum += in[c];
                     const double row_mean = sum / count;
                     double squares = 0.0;
                     for (std::int64_t c = 0; c < channels; ++c) {
                       const double deviation = in[c] - row_mean;
                       squares += deviation * deviation;
                     }
                     mean[r] = static_cast<float>(row_mean);
                     rstd[r] = static_cast<float>(1.0 / std::sqrt(squares / count + kLayerNormEps));
                     // y uses mean and rstd as stored, so backward sees the very xhat forward used.
                     float* out = y.data() + r * channels;
                     for (std::int64_t c = 0; c < channels; ++c) {
                       const double xhat = (static_cast<double>(in[c]) - mean[r]) * rstd[r];
                       out[c] = static_cast<float>(xhat * weight[c] + bias[c]);
                     }
                   }
                 });
}

void CpuDevice::do_layernorm_backward(std::span<const float> x, std::span<const float> weight,
                                      std::span<const float> mean, std::span<const float> rstd,
                                      std::span<const float> dy, std::span<float> dx,
                                      std::span<float> dweight, std::span<float> dbias,
                                      std::int64_t rows, std::int64_t channels) {
  const auto count = static_cast<double>(channels);
  const auto xhat_of = [&](std::int64_t r, std::int64_t c) {
    return (x[r * channels + c] - static_cast<double>(mean[r])) * static_cast<double>(rstd[r]);
  };
  // dx, in pieces of rows: g = dy * weight and the two row means the formula subtracts.
  for_each_piece(
      pool(), rows, rows_per_piece(pool(), channels), [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t r = begin; r < end; ++r) {
          const float* grad_out = dy.data() + r * channels;
          float* grad_in = dx.data() + r * channels;
          double g_sum = 0.0, g_xhat_sum = 0.0;
          for (std::int64_t c = 0; c < channels; ++c) {
            const double g = static_cast<double>(grad_out[c]) * weight[c];
            g_sum += g;
            g_xhat_sum += g * xhat_of(r, c);
          }
          const double g_mean = g_sum / count;
          const double g_xhat_mean = g_xhat_sum / count;
          const double row_rstd = rstd[r];
          for (std::int64_t c = 0; c < channels; ++c) {
            const double g = static_cast<double>(grad_out[c]) * weight[c];
            grad_in[c] = static_cast<float>(grad_in[c] +
                                            (g - g_mean - xhat_of(r, c) * g_xhat_mean) * row_rstd);
          }
        }
      });
  // dweight and dbias [C], in pieces of columns: each column summed over the rows in double in
  // ops/column_sums.hpp's order (chunks of rows, then the chunks in order), added to the output
  // once.
  for_each_piece(pool(), channels, cpu::columns_per_piece(pool()),
                 [&](std::int64_t begin, std::int64_t end) {
                   const auto width = static_cast<std::size_t>(end - begin);
                   std::vector<double> dweight_sum(width, 0.0), dbias_sum(width, 0.0);
                   std::vector<double> chunk_w(width), chunk_b(width);
                   for (std::int64_t first = 0; first < rows; first += kColumnSumChunkRows) {
                     std::fill(chunk_w.begin(), chunk_w.end(), 0.0);
                     std::fill(chunk_b.begin(), chunk_b.end(), 0.0);
                     const std::int64_t last = std::min(rows, first + kColumnSumChunkRows);
                     for (std::int64_t r = first; r < last; ++r) {
                       const float* grad_out = dy.data() + r * channels;
                       for (std::int64_t c = begin; c < end; ++c) {
                         chunk_w[c - begin] += grad_out[c] * xhat_of(r, c);
                         chunk_b[c - begin] += grad_out[c];
                       }
                     }
                     for (std::size_t i = 0; i < width; ++i) {
                       dweight_sum[i] += chunk_w[i];
                       dbias_sum[i] += chunk_b[i];
                     }
                   }
                   for (std::int64_t c = begin; c < end; ++c) {
                     dweight[c] = static_cast<float>(dweight[c] + dweight_sum[c - begin]);
                     dbias[c] = static_cast<float>(dbias[c] + dbias_sum[c - begin]);
                   }
                 });
}

void CpuDevice::do_conv1d_forward(std::span<const float> x, std::span<const float> w,
                                  std::span<const float> b, std::span<float> y, std::int64_t rows,
                                  std::int64_t in, std::int64_t out) {
  // y is [rows, out] = x [rows, in] * w [in, out]
  cpu::gemm({.a = {x.data(), in, false},
             .b = {w.data(), out, false},
             .c = y.data(),
             .c_stride_elems = out,
             .m = rows,
             .n = out,
             .k = in},
            pool());
  cpu::add_bias_rows(pool(), b, y, rows, out);
}

void CpuDevice::do_conv1d_backward(std::span<const float> x, std::span<const float> w,
                                   std::span<const float> dy, std::span<float> dw,
                                   std::span<float> db, std::span<float> dx, std::int64_t rows,
                                   std::int64_t in, std::int64_t out) {
  // dw is [in, out] += x^T [in, rows] * dy [rows, out]
  cpu::gemm({.a = {x.data(), in, true},
             .b = {dy.data(), out, false},
             .c = dw.data(),
             .c_stride_elems = out,
             .m = in,
             .n = out,
             .k = rows,
             .accumulate = true},
            pool());
  cpu::add_column_sums(pool(), dy, db, rows, out);
  // dx is [rows, in] = dy [rows, out] * w^T [out, in]
  if (!dx.empty()) {
    cpu::gemm({.a = {dy.data(), out, false},
               .b = {w.data(), out, true},
               .c = dx.data(),
               .c_stride_elems = in,
               .m = rows,
               .n = in,
               .k = out},
              pool());
  }
}

namespace {

// The tanh GELU over n elements, built for the baseline, AVX2+FMA and AVX-512+FMA (cpu_isa.hpp
// picks one; `flatten` inlines gelu_tanh.hpp into each, so its double loop vectorises at that
// width). With contraction off and no fast-math, each does the same IEEE operations and gives
// the same bits.
[[gnu::always_inline]] inline void gelu_forward(const float* x, float* y, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) y[i] = gelu_tanh::forward(x[i]);
}
[[gnu::always_inline]] inline void gelu_backward(const float* x, const float* dy, float* dx,
                                                 std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) dx[i] = gelu_tanh::backward(x[i], dy[i]);
}

[[gnu::flatten]] void gelu_forward_baseline(const float* x, float* y, std::int64_t n) {
  gelu_forward(x, y, n);
}
[[gnu::flatten]] void gelu_backward_baseline(const float* x, const float* dy, float* dx,
                                             std::int64_t n) {
  gelu_backward(x, dy, dx, n);
}
[[gnu::flatten]] ZL_TARGET_AVX2 void gelu_forward_avx2(const float* x, float* y, std::int64_t n) {
  gelu_forward(x, y, n);
}
[[gnu::flatten]] ZL_TARGET_AVX2 void gelu_backward_avx2(const float* x, const float* dy, float* dx,
                                                        std::int64_t n) {
  gelu_backward(x, dy, dx, n);
}
[[gnu::flatten]] ZL_TARGET_AVX512 void gelu_forward_avx512(const float* x, float* y,
                                                           std::int64_t n) {
  gelu_forward(x, y, n);
}
[[gnu::flatten]] ZL_TARGET_AVX512 void gelu_backward_avx512(const float* x, const float* dy,
                                                            float* dx, std::int64_t n) {
  gelu_backward(x, dy, dx, n);
}

}  // namespace

void CpuDevice::do_gelu_tanh_forward(std::span<const float> x, std::span<float> y) {
  static const auto forward =
      cpu::widest_of(gelu_forward_baseline, gelu_forward_avx2, gelu_forward_avx512);
  for_each_piece(pool(), static_cast<std::int64_t>(x.size()),
                 [&](std::int64_t begin, std::int64_t end) {
                   forward(x.data() + begin, y.data() + begin, end - begin);
                 });
}

void CpuDevice::do_gelu_tanh_backward(std::span<const float> x, std::span<const float> dy,
                                      std::span<float> dx) {
  static const auto backward =
      cpu::widest_of(gelu_backward_baseline, gelu_backward_avx2, gelu_backward_avx512);
  for_each_piece(pool(), static_cast<std::int64_t>(x.size()),
                 [&](std::int64_t begin, std::int64_t end) {
                   backward(x.data() + begin, dy.data() + begin, dx.data() + begin, end - begin);
                 });
}

}  // namespace zl
