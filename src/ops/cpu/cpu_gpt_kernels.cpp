// cpu_gpt_kernels.cpp — the CPU kernels GPT-2 adds to the Device table: embeddings, LayerNorm,
// Conv1D and tanh GELU (causal attention: cpu_attention.cpp). Plain loops in a fixed order with
// sums in double, each result rounded once to float, so the bits never depend on threads or
// addresses; Conv1D's products go through Eigen like linear_forward (see cpu_kernel_support.hpp).
#include <algorithm>
#include <cmath>
#include <numbers>
#include <vector>

#include "core/error.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "ops/cpu/cpu_kernel_support.hpp"

namespace zl {

using cpu::matrix;

namespace {

constexpr double kLayerNormEps = 1e-5;  // torch.nn.LayerNorm's and GPT-2's default
constexpr double kGeluCoeff = 0.044715;
constexpr double kSqrt2OverPi = std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2/pi)

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
  for (std::int64_t r = 0; r < rows; ++r) {
    // x row r is [C]; two passes (mean, then squared deviations) avoid E[x^2] - E[x]^2's
    // cancellation.
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
}

void CpuDevice::do_layernorm_backward(std::span<const float> x, std::span<const float> weight,
                                      std::span<const float> mean, std::span<const float> rstd,
                                      std::span<const float> dy, std::span<float> dx,
                                      std::span<float> dweight, std::span<float> dbias,
                                      std::int64_t rows, std::int64_t channels) {
  const auto count = static_cast<double>(channels);
  const auto width = static_cast<std::size_t>(channels);
  // dweight and dbias [C]: column sums over rows 0.., added to the outputs once at the end.
  std::vector<double> dweight_sum(width, 0.0), dbias_sum(width, 0.0);
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* in = x.data() + r * channels;
    const float* grad_out = dy.data() + r * channels;
    float* grad_in = dx.data() + r * channels;
    const double row_mean = mean[r];
    const double row_rstd = rstd[r];
    // g = dy * weight; the two row means the formula subtracts.
    double g_sum = 0.0, g_xhat_sum = 0.0;
    for (std::int64_t c = 0; c < channels; ++c) {
      const double xhat = (in[c] - row_mean) * row_rstd;
      const double g = static_cast<double>(grad_out[c]) * weight[c];
      g_sum += g;
      g_xhat_sum += g * xhat;
    }
    const double g_mean = g_sum / count;
    const double g_xhat_mean = g_xhat_sum / count;
    for (std::int64_t c = 0; c < channels; ++c) {
      const double xhat = (in[c] - row_mean) * row_rstd;
      const double g = static_cast<double>(grad_out[c]) * weight[c];
      grad_in[c] = static_cast<float>(grad_in[c] + (g - g_mean - xhat * g_xhat_mean) * row_rstd);
      dweight_sum[c] += grad_out[c] * xhat;
      dbias_sum[c] += grad_out[c];
    }
  }
  for (std::size_t c = 0; c < width; ++c) {
    dweight[c] = static_cast<float>(dweight[c] + dweight_sum[c]);
    dbias[c] = static_cast<float>(dbias[c] + dbias_sum[c]);
  }
}

void CpuDevice::do_conv1d_forward(std::span<const float> x, std::span<const float> w,
                                  std::span<const float> b, std::span<float> y, std::int64_t rows,
                                  std::int64_t in, std::int64_t out) {
  // y is [rows, out] = x [rows, in] * w [in, out]
  matrix(y, rows, out).noalias() = matrix(x, rows, in) * matrix(w, in, out);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t o = 0; o < out; ++o) y[r * out + o] += b[o];
  }
}

void CpuDevice::do_conv1d_backward(std::span<const float> x, std::span<const float> w,
                                   std::span<const float> dy, std::span<float> dw,
                                   std::span<float> db, std::span<float> dx, std::int64_t rows,
                                   std::int64_t in, std::int64_t out) {
  // dw is [in, out] += x^T [in, rows] * dy [rows, out]
  matrix(dw, in, out).noalias() += matrix(x, rows, in).transpose() * matrix(dy, rows, out);

  // db is [out]: each column of dy summed from row 0 down, then added to db once.
  std::vector<float> column_sums(static_cast<std::size_t>(out), 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t o = 0; o < out; ++o) column_sums[o] += dy[r * out + o];
  }
  for (std::int64_t o = 0; o < out; ++o) db[o] += column_sums[o];

  // dx is [rows, in] = dy [rows, out] * w^T [out, in]
  if (!dx.empty()) {
    matrix(dx, rows, in).noalias() = matrix(dy, rows, out) * matrix(w, in, out).transpose();
  }
}

void CpuDevice::do_gelu_tanh_forward(std::span<const float> x, std::span<float> y) {
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double u = kSqrt2OverPi * (v + kGeluCoeff * v * v * v);
    y[i] = static_cast<float>(0.5 * v * (1.0 + std::tanh(u)));
  }
}

void CpuDevice::do_gelu_tanh_backward(std::span<const float> x, std::span<const float> dy,
                                      std::span<float> dx) {
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double th = std::tanh(kSqrt2OverPi * (v + kGeluCoeff * v * v * v));
    const double du_dx = kSqrt2OverPi * (1.0 + 3.0 * kGeluCoeff * v * v);
    const double slope = 0.5 * (1.0 + th) + 0.5 * v * (1.0 - th * th) * du_dx;
    dx[i] = static_cast<float>(static_cast<double>(dy[i]) * slope);
  }
}

}  // namespace zl
