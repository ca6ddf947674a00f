// cpu_device.cpp — the CPU kernels. Products go through Eigen; bias sums, GELU and
// cross-entropy are plain loops whose summation order is written down. Why the products give the
// same bits at any address: cpu_kernel_support.hpp. The GPT-2 kernels: cpu_gpt_kernels.cpp.
#include "ops/cpu/cpu_device.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <new>
#include <numbers>
#include <vector>

#include "core/error.hpp"
#include "ops/cpu/cpu_kernel_support.hpp"

namespace zl {

using cpu::matrix;

namespace {

constexpr std::align_val_t kAlignment{64};

}  // namespace

void* CpuDevice::allocate(std::size_t bytes) {
  void* ptr = ::operator new(bytes, kAlignment);
  std::memset(ptr, 0, bytes);
  return ptr;
}

void CpuDevice::deallocate(void* ptr, std::size_t /*bytes*/) {
  // The unsized form: clang enables sized deallocation only with -fsized-deallocation.
  ::operator delete(ptr, kAlignment);
}

void CpuDevice::do_linear_forward(std::span<const float> x, std::span<const float> w,
                                  std::span<const float> b, std::span<float> y, std::int64_t rows,
                                  std::int64_t in, std::int64_t out) {
  // y is [rows, out] = x [rows, in] * w^T [in, out]
  matrix(y, rows, out).noalias() = matrix(x, rows, in) * matrix(w, out, in).transpose();
  if (b.empty()) return;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t o = 0; o < out; ++o) y[r * out + o] += b[o];
  }
}

void CpuDevice::do_linear_backward(std::span<const float> x, std::span<const float> w,
                                   std::span<const float> dy, std::span<float> dw,
                                   std::span<float> db, std::span<float> dx, std::int64_t rows,
                                   std::int64_t in, std::int64_t out) {
  // dw is [out, in] += dy^T [out, rows] * x [rows, in]
  matrix(dw, out, in).noalias() += matrix(dy, rows, out).transpose() * matrix(x, rows, in);

  // db is [out]: each column of dy summed from row 0 down, then added to db once.
  if (!db.empty()) {
    std::vector<float> column_sums(static_cast<std::size_t>(out), 0.0f);
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t o = 0; o < out; ++o) column_sums[o] += dy[r * out + o];
    }
    for (std::int64_t o = 0; o < out; ++o) db[o] += column_sums[o];
  }

  // dx is [rows, in] = dy [rows, out] * w [out, in]
  if (!dx.empty()) matrix(dx, rows, in).noalias() = matrix(dy, rows, out) * matrix(w, out, in);
}

void CpuDevice::do_gelu_forward(std::span<const float> x, std::span<float> y) {
  constexpr double kInvSqrt2 = 1.0 / std::numbers::sqrt2;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    y[i] = static_cast<float>(0.5 * v * (1.0 + std::erf(v * kInvSqrt2)));
  }
}

void CpuDevice::do_gelu_backward(std::span<const float> x, std::span<const float> dy,
                                 std::span<float> dx) {
  constexpr double kInvSqrt2 = 1.0 / std::numbers::sqrt2;
  constexpr double kInvSqrt2Pi = std::numbers::inv_sqrtpi / std::numbers::sqrt2;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double v = x[i];
    const double cdf = 0.5 * (1.0 + std::erf(v * kInvSqrt2));  // Phi(x)
    const double pdf = kInvSqrt2Pi * std::exp(-0.5 * v * v);   // phi(x)
    dx[i] = static_cast<float>(static_cast<double>(dy[i]) * (cdf + v * pdf));
  }
}

double CpuDevice::do_cross_entropy_forward_backward(std::span<const float> logits,
                                                    std::span<const std::int64_t> labels,
                                                    std::span<float> dlogits, std::int64_t rows,
                                                    std::int64_t classes, std::int64_t mean_rows) {
  double loss_sum = 0.0;
  for (std::int64_t r = 0; r < rows; ++r) {
    // logits row r is [classes]
    const float* row = logits.data() + r * classes;
    float* drow = dlogits.data() + r * classes;
    const std::int64_t label = labels[r];
    ZL_CHECK(label >= 0 && label < classes, "cross_entropy: row {} has label {}, outside [0, {})",
             r, label, classes);
    // Subtracting the row max keeps every exp in (0, 1], so the sum cannot overflow.
    double max_logit = row[0];
    for (std::int64_t c = 1; c < classes; ++c)
      max_logit = std::max(max_logit, static_cast<double>(row[c]));
    double exp_sum = 0.0;
    for (std::int64_t c = 0; c < classes; ++c) exp_sum += std::exp(row[c] - max_logit);
    loss_sum += std::log(exp_sum) - (row[label] - max_logit);
    for (std::int64_t c = 0; c < classes; ++c) {
      const double softmax = std::exp(row[c] - max_logit) / exp_sum;
      const double target = c == label ? 1.0 : 0.0;
      drow[c] = static_cast<float>((softmax - target) / static_cast<double>(mean_rows));
    }
  }
  return loss_sum;
}

}  // namespace zl
