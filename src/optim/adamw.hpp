// adamw.hpp — the one AdamW update, with torch.optim.AdamW semantics (decoupled weight decay,
// bias correction, eps added outside the square root). The reference kernel: the engines (and
// offload) call adamw_update_fused (adamw_fused.hpp), which computes the same operations in the
// same order per element, so the same element always gets the same bits.
#pragma once

#include <cstdint>
#include <span>

namespace zl {

/// Hyperparameters, with PyTorch's defaults.
struct AdamWConfig {
  double lr = 1e-3;            ///< learning rate: the peak of the run's schedule (lr_schedule.hpp)
  double beta1 = 0.9;          ///< decay of the first moment (exp_avg), in [0, 1)
  double beta2 = 0.999;        ///< decay of the second moment (exp_avg_sq), in [0, 1)
  double eps = 1e-8;           ///< added to the bias-corrected sqrt(v), outside the square root
  double weight_decay = 0.01;  ///< decoupled: p is multiplied by 1 - lr * weight_decay
};

/// Per-step scalars, computed once in double and rounded to float as PyTorch does.
struct AdamWScalars {
  float decay;            ///< 1 - lr * weight_decay
  float beta1;            ///< beta1 rounded to float
  float one_minus_beta1;  ///< 1 - beta1
  float beta2;            ///< beta2 rounded to float
  float one_minus_beta2;  ///< 1 - beta2
  float step_size;        ///< lr / (1 - beta1^t)
  float bias2_sqrt;       ///< sqrt(1 - beta2^t)
  float eps;              ///< eps rounded to float
};

/// Scalars of optimizer step `step` (1-based, as PyTorch counts).
AdamWScalars adamw_scalars(const AdamWConfig& config, std::int64_t step);

/// One AdamW step on matching spans: for each i,
///   p = p * decay
///   m = m * b1 + (1 - b1) * g
///   v = v * b2 + (1 - b2) * g * g
///   p = p + (-step_size) * (m / (sqrt(v) / bias2_sqrt + eps))
void adamw_update(std::span<float> params, std::span<const float> grads, std::span<float> exp_avg,
                  std::span<float> exp_avg_sq, const AdamWScalars& scalars);

}  // namespace zl
