// gpt_test_support.hpp — driving a model the way an engine does, for the GPT tests: every unit's
// flat buffer in a vector, one micro-batch forward (forward_order()), loss and backward (reversed).
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.hpp"

namespace zl::test {

/// Every unit's flat parameters (or gradients), in unit order.
using UnitFloats = std::vector<std::vector<float>>;

/// The model's own init of every unit.
inline UnitFloats init_params(const Model& model, std::uint64_t seed) {
  UnitFloats params;
  for (std::size_t u = 0; u < model.units().size(); ++u) {
    params.emplace_back(static_cast<std::size_t>(model.units()[u].numel()));
    model.init_unit(static_cast<int>(u), params.back(), seed);
  }
  return params;
}

inline UnitFloats zeros_like(const UnitFloats& params) {
  UnitFloats zeros;
  for (const auto& unit : params) zeros.emplace_back(unit.size(), 0.0f);
  return zeros;
}

/// The first half of a micro-batch as an engine runs it: begin(batch), then forward in
/// forward_order().
inline void forward(Model& model, const Batch& batch, const UnitFloats& params) {
  model.begin(batch);
  for (const int u : model.forward_order()) model.forward_unit(u, params[u]);
}

/// The second half: loss(grad_scale), then backward in the reverse order, adding into `grads`.
/// Returns the loss.
inline float backward(Model& model, const UnitFloats& params, UnitFloats& grads,
                      float grad_scale = 1.0f) {
  const auto order = model.forward_order();
  const float loss = model.loss(grad_scale);
  for (auto u = order.rbegin(); u != order.rend(); ++u)
    model.backward_unit(*u, params[*u], grads[*u]);
  return loss;
}

/// One micro-batch as an engine runs it: forward in forward_order(), loss(grad_scale), backward in
/// the reverse order, adding into `grads`. Returns the loss.
inline float forward_backward(Model& model, const Batch& batch, const UnitFloats& params,
                              UnitFloats& grads, float grad_scale = 1.0f) {
  forward(model, batch, params);
  return backward(model, params, grads, grad_scale);
}

}  // namespace zl::test
