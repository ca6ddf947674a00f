// device.hpp — the Device interface: tagged allocation (feeding the rank's memory ledger) and
// the kernels models and optimizers need. cpu/ implements it with Eigen and plain loops; a CUDA
// device implements the same table. Kernels take raw spans in row-major layout.
#pragma once

#include <cstdint>
#include <span>

#include "core/buffer.hpp"
#include "core/memory_ledger.hpp"

namespace zl {

/// Memory and kernels of one rank. Not thread-safe: one Device per rank.
class Device : public Allocator {
 public:
  /// Allocates a zeroed buffer booked under `category` in this device's ledger.
  Buffer alloc(MemCategory category, DType dtype, Shape shape) {
    return Buffer(*this, ledger_, category, dtype, std::move(shape));
  }
  /// Bytes in use and peak bytes per category on this device.
  MemoryLedger& ledger() { return ledger_; }
  const MemoryLedger& ledger() const { return ledger_; }

  // ---- kernels (fp32, row-major) ----

  /// y[rows, out] = x[rows, in] * w[out, in]^T + b[out]
  virtual void linear_forward(std::span<const float> x, std::span<const float> w,
                              std::span<const float> b, std::span<float> y, std::int64_t rows,
                              std::int64_t in, std::int64_t out) = 0;

  /// Given dy[rows, out]: dw[out, in] += dy^T x, db[out] += sum over rows of dy (rows in order),
  /// dx[rows, in] = dy w (dx may be empty when the input needs no gradient).
  virtual void linear_backward(std::span<const float> x, std::span<const float> w,
                               std::span<const float> dy, std::span<float> dw, std::span<float> db,
                               std::span<float> dx, std::int64_t rows, std::int64_t in,
                               std::int64_t out) = 0;

  /// y = x * Phi(x) with the exact erf form, as torch.nn.GELU().
  virtual void gelu_forward(std::span<const float> x, std::span<float> y) = 0;

  /// dx = dy * d/dx[x * Phi(x)].
  virtual void gelu_backward(std::span<const float> x, std::span<const float> dy,
                             std::span<float> dx) = 0;

  /// Mean cross-entropy of logits[rows, classes] against labels[rows]; writes d(loss)/d(logits).
  virtual float cross_entropy_forward_backward(std::span<const float> logits,
                                               std::span<const std::int64_t> labels,
                                               std::span<float> dlogits, std::int64_t rows,
                                               std::int64_t classes) = 0;

 private:
  MemoryLedger ledger_;
};

}  // namespace zl
