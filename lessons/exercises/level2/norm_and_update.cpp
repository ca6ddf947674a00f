// level2/norm_and_update.cpp — exercise 5, level 2: the end of every exercise engine's step,
// which level 1 gives you (../norm_and_update.cpp). Every stage calls these two functions with
// what its rank holds: whole units under DDP (`sharded` false), its own shards under ZeRO.
//   1. the norm of the whole model's gradient, the same bits on every rank    (TODO 1)
//   2. decide: a step whose norm is not finite does not update               (TODO 2)
//   3. clip by that norm, then AdamW on the elements this rank owns           (TODO 3)
// Grade it with `exercise_grader_level2`, once your engines pass `exercise_grader`.
#include "exercise.hpp"

namespace zl::exercise {

// The parameters are [[maybe_unused]] only until you use them.
double model_grad_norm([[maybe_unused]] Comm& comm, [[maybe_unused]] Device& device,
                       [[maybe_unused]] const std::vector<UnitLayout>& layout,
                       [[maybe_unused]] const std::vector<TypedSpan>& grads,
                       [[maybe_unused]] double loss_scale, [[maybe_unused]] bool sharded) {
  // TODO 1: the norm clipping uses is the norm of the whole model's gradient
  todo("norm_and_update.cpp", 1,
       "the norm that clipping uses is the whole model's: every rank must get the same value, "
       "made from every rank's part (each part's sums of squares per block, added in the order "
       "of the unsharded model), the loss scale taken out",
       "unscaled_partials(grads, loss_scale, device), then sharded_grad_norm(comm, device, "
       "layout, partials) when sharded, else norm_from_partials(partials)");
}

bool apply_update([[maybe_unused]] double grad_norm, [[maybe_unused]] std::int64_t step,
                  [[maybe_unused]] const std::vector<TypedSpan>& params,
                  [[maybe_unused]] const std::vector<TypedSpan>& grads,
                  [[maybe_unused]] OptimizerState& opt,
                  [[maybe_unused]] const EngineOptions& options, [[maybe_unused]] Device& device) {
  // TODO 2: skip a step whose norm is not finite, the same way on every rank
  todo("norm_and_update.cpp", 2,
       "a step whose norm is not finite must not update, and every rank must decide alike (in "
       "fp16 a non-finite norm is an overflow: the loss scale backs off)",
       "if (!decide_update(grad_norm, step, opt, options)) return false;");
  // TODO 3: clip by the whole norm, then AdamW on this rank's elements
  todo("norm_and_update.cpp", 3,
       "scale the gradients by min(1, max_norm / (norm + 1e-6)) of the whole model's norm (1 "
       "without clipping), then run AdamW on the elements this rank owns",
       "adamw_step(params, grads, clip_factor(grad_norm, options.features), opt, options, "
       "device); return true;");
}

}  // namespace zl::exercise
