// cpu_device.hpp — the CPU Device: 64-byte aligned host memory, GEMMs through Eigen and every
// other kernel as plain loops in a fixed order, so equal inputs give equal bits at any address.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "ops/device.hpp"

namespace zl {

/// Host memory and fp32 kernels of one rank. Not thread-safe: one CpuDevice per rank.
class CpuDevice final : public Device {
 public:
  CpuDevice() = default;
  CpuDevice(const CpuDevice&) = delete;
  CpuDevice& operator=(const CpuDevice&) = delete;

  /// Returns `bytes` zeroed bytes aligned to 64 (a cache line, and enough for any SIMD load).
  void* allocate(std::size_t bytes) override;
  /// Frees what allocate returned.
  void deallocate(void* ptr, std::size_t bytes) override;

  /// y[rows, out] = x[rows, in] * w[out, in]^T, then + b[out] added row by row.
  void linear_forward(std::span<const float> x, std::span<const float> w, std::span<const float> b,
                      std::span<float> y, std::int64_t rows, std::int64_t in,
                      std::int64_t out) override;
  /// dw[out, in] += dy^T x; db[out] += (dy[0, :] + dy[1, :] + ...) summed in row order;
  /// dx[rows, in] = dy w unless dx is empty.
  void linear_backward(std::span<const float> x, std::span<const float> w,
                       std::span<const float> dy, std::span<float> dw, std::span<float> db,
                       std::span<float> dx, std::int64_t rows, std::int64_t in,
                       std::int64_t out) override;
  /// y = 0.5 x (1 + erf(x / sqrt 2)), evaluated in double and rounded once to float.
  void gelu_forward(std::span<const float> x, std::span<float> y) override;
  /// dx = dy * (Phi(x) + x phi(x)), evaluated in double and rounded once to float.
  void gelu_backward(std::span<const float> x, std::span<const float> dy,
                     std::span<float> dx) override;
  /// Per row: max-subtracted log-sum-exp in double; loss = (sum of row losses) / rows and
  /// dlogits = (softmax - onehot) / rows.
  float cross_entropy_forward_backward(std::span<const float> logits,
                                       std::span<const std::int64_t> labels,
                                       std::span<float> dlogits, std::int64_t rows,
                                       std::int64_t classes) override;
};

}  // namespace zl
