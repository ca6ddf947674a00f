// norm_and_update.cpp — the end of every exercise engine's step, given at level 1: the norm of
// the whole model's gradient, then the decision, the clipping and AdamW on the elements this rank
// owns. Level 2 (level2/norm_and_update.cpp) asks you to write these two functions yourself.
#include "exercise.hpp"

namespace zl::exercise {

double model_grad_norm(Comm& comm, Device& device, const std::vector<UnitLayout>& layout,
                       const std::vector<TypedSpan>& grads, double loss_scale, bool sharded) {
  const NormPartials partials = unscaled_partials(grads, loss_scale, device);
  return sharded ? sharded_grad_norm(comm, device, layout, partials) : norm_from_partials(partials);
}

bool apply_update(double grad_norm, std::int64_t step, const std::vector<TypedSpan>& params,
                  const std::vector<TypedSpan>& grads, OptimizerState& opt,
                  const EngineOptions& options, Device& device) {
  if (!decide_update(grad_norm, step, opt, options)) return false;
  adamw_step(params, grads, clip_factor(grad_norm, options.features), opt, options, device);
  return true;
}

}  // namespace zl::exercise
