// adamw.cpp — the AdamW kernel, the same float operations in the same order as PyTorch's
// single-tensor AdamW (torch/optim/adamw.py): scalars in double, elementwise math in float.
#include "optim/adamw.hpp"

#include <cmath>

#include "core/error.hpp"

namespace zl {

AdamWScalars adamw_scalars(const AdamWConfig& config, std::int64_t step) {
  ZL_CHECK(step >= 1, "AdamW step {} is invalid: steps count from 1", step);
  const double t = static_cast<double>(step);
  const double bias_correction1 = 1.0 - std::pow(config.beta1, t);
  const double bias_correction2 = 1.0 - std::pow(config.beta2, t);
  return {
      .decay = static_cast<float>(1.0 - config.lr * config.weight_decay),
      .beta1 = static_cast<float>(config.beta1),
      .one_minus_beta1 = static_cast<float>(1.0 - config.beta1),
      .beta2 = static_cast<float>(config.beta2),
      .one_minus_beta2 = static_cast<float>(1.0 - config.beta2),
      .step_size = static_cast<float>(config.lr / bias_correction1),
      .bias2_sqrt = static_cast<float>(std::sqrt(bias_correction2)),
      .eps = static_cast<float>(config.eps),
  };
}

void adamw_update(std::span<float> params, std::span<const float> grads, std::span<float> exp_avg,
                  std::span<float> exp_avg_sq, const AdamWScalars& s) {
  ZL_CHECK(grads.size() == params.size() && exp_avg.size() == params.size() &&
               exp_avg_sq.size() == params.size(),
           "AdamW spans disagree: params {}, grads {}, exp_avg {}, exp_avg_sq {}", params.size(),
           grads.size(), exp_avg.size(), exp_avg_sq.size());
  const float neg_step_size = -s.step_size;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const float g = grads[i];
    const float m = exp_avg[i] * s.beta1 + s.one_minus_beta1 * g;
    const float v = exp_avg_sq[i] * s.beta2 + s.one_minus_beta2 * (g * g);
    const float denom = std::sqrt(v) / s.bias2_sqrt + s.eps;
    params[i] = params[i] * s.decay + neg_step_size * (m / denom);
    exp_avg[i] = m;
    exp_avg_sq[i] = v;
  }
}

}  // namespace zl
