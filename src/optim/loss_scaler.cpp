// loss_scaler.cpp — DeepSpeed's DynamicLossScaler rules (fp16/loss_scaler.py), step by step.
#include "optim/loss_scaler.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace zl {

void validate(const LossScaleConfig& config) {
  ZL_CHECK(config.initial_scale_power >= 0 && config.initial_scale_power <= 63,
           "fp16.initial_scale_power {} is invalid: use 0..63", config.initial_scale_power);
  ZL_CHECK(config.window >= 1, "fp16.loss_scale_window {} is invalid: use 1 or more steps",
           config.window);
  ZL_CHECK(config.hysteresis >= 1, "fp16.hysteresis {} is invalid: use 1 or more",
           config.hysteresis);
  ZL_CHECK(config.min_scale > 0.0 && std::isfinite(config.min_scale),
           "fp16.min_loss_scale {} is invalid: use a positive number", config.min_scale);
  ZL_CHECK(config.static_scale >= 0.0 && std::isfinite(config.static_scale),
           "fp16.loss_scale {} is invalid: use a positive static scale, or 0 for dynamic scaling",
           config.static_scale);
}

LossScaler::LossScaler(const LossScaleConfig& config) : fp16_(true), config_(config) {
  validate(config);
  const bool fixed = config.static_scale > 0.0;
  state_ = {.scale = fixed ? config.static_scale : std::ldexp(1.0, config.initial_scale_power),
            .clean_steps = 0,
            .hysteresis_left = config.hysteresis};
}

void LossScaler::update(bool overflow) {
  if (!fp16_ || config_.static_scale > 0.0) return;
  if (overflow) {
    // DeepSpeed: halve only once the hysteresis budget is spent; the budget is not refilled
    // by clean steps, only by growth.
    if (state_.hysteresis_left <= 1) {
      state_.scale = std::max(state_.scale / 2.0, config_.min_scale);
    } else {
      --state_.hysteresis_left;
    }
    state_.clean_steps = 0;
    return;
  }
  ++state_.clean_steps;
  if (state_.clean_steps % config_.window == 0) {
    state_.scale = state_.scale * 2.0;
    state_.hysteresis_left = config_.hysteresis;
    state_.clean_steps = 0;
  }
}

void LossScaler::load(const LossScalerState& state) {
  ZL_CHECK(state.scale > 0.0 && std::isfinite(state.scale) && state.clean_steps >= 0 &&
               state.hysteresis_left >= 0,
           "loss scaler state (scale {}, clean steps {}, hysteresis left {}) is invalid: the "
           "checkpoint is damaged",
           state.scale, state.clean_steps, state.hysteresis_left);
  state_ = state;
}

}  // namespace zl
