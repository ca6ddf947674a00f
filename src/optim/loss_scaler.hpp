// loss_scaler.hpp — dynamic loss scaling for fp16 with DeepSpeed's rules and defaults. The loss is
// multiplied by the scale before backward so small fp16 gradients do not flush to zero; the
// gradients are divided by it again before the update. A step whose gradients overflow (any
// non-finite value on any rank, agreed through the canonical norm) is skipped and, once the
// hysteresis budget is spent, the scale halves (never below the minimum). After `window` clean
// steps in a row the scale doubles. A static scale (fp16.loss_scale > 0) never moves; overflowing
// steps are skipped all the same. Every rank and the reference run the same scaler on the same
// decisions, so they skip the same steps with the same scales.
#pragma once

#include <cstdint>

namespace zl {

/// fp16.{initial_scale_power, loss_scale_window, hysteresis, min_loss_scale} of a DeepSpeed
/// config, with its defaults.
struct LossScaleConfig {
  int initial_scale_power = 16;  ///< the first scale is 2^power
  std::int64_t window = 1000;    ///< clean steps before the scale doubles
  int hysteresis = 2;            ///< overflows tolerated before the scale halves
  double min_scale = 1.0;        ///< the scale never drops below this
  /// fp16.loss_scale: > 0 keeps the scale at this value for the whole run (DeepSpeed's static
  /// scaling: an overflowing step is still skipped, the scale never moves); 0 is dynamic.
  double static_scale = 0.0;
};

/// Throws zl::Error naming the bad field if a value is out of range.
void validate(const LossScaleConfig& config);

/// What a checkpoint stores to resume the scaler exactly.
struct LossScalerState {
  double scale = 1.0;            ///< backward multiplies the loss by this (1 when disabled)
  std::int64_t clean_steps = 0;  ///< clean steps since the last overflow or growth
  int hysteresis_left = 0;       ///< overflows still tolerated before the next halving
};

/// The dynamic scaler. Disabled (scale 1, never changes) unless constructed with a config.
class LossScaler {
 public:
  /// A scaler fixed at 1 (fp32 and bf16 training).
  LossScaler() = default;
  /// An fp16 scaler: dynamic from 2^config.initial_scale_power, or static at config.static_scale.
  explicit LossScaler(const LossScaleConfig& config);

  /// The scale the next backward multiplies the loss by.
  double scale() const { return state_.scale; }
  /// True for fp16 training (constructed with a config): a step whose gradients overflow is
  /// skipped, and, unless the scale is static, the scale moves with overflows.
  bool skips_overflows() const { return fp16_; }

  /// Records the outcome of a step: `overflow` when its gradients were not finite.
  void update(bool overflow);

  /// The scale and counters, for a checkpoint; load() restores them.
  LossScalerState state() const { return state_; }
  /// Restores a state from state(); throws zl::Error if it is not one a scaler could reach.
  void load(const LossScalerState& state);

 private:
  bool fp16_ = false;
  LossScaleConfig config_{};
  LossScalerState state_{};
};

}  // namespace zl
