// exercise.hpp — what the exercise engines share: the four factories a learner completes
// (ddp.cpp, zero1.cpp, zero2.cpp, zero3.cpp), the TODO marker their skeletons throw, and the
// features they train with. The engines use the same helpers as zerolab's own (unit buffers,
// micro-batches, the optimizer step, the sharded norm); what they leave to the learner are the
// collective calls and the shard bookkeeping. `exercise_grader` grades them (README.md).
#pragma once

#include <memory>
#include <string_view>

#include "core/error.hpp"
#include "engines/engine.hpp"
#include "engines/micro_batch.hpp"
#include "engines/optimizer_step.hpp"
#include "engines/partition.hpp"
#include "engines/sharding.hpp"
#include "optim/grad_norm.hpp"

namespace zl::exercise {

/// Thrown by a part of an exercise that is still to write.
class TodoError : public Error {
 public:
  using Error::Error;
};

/// Marks part `number` of exercise `file` as still to write: throws TodoError "zero1.cpp TODO 2
/// is not written yet: <idea>", and, once show_hints(true), "The call: <call>".
[[noreturn]] void todo(std::string_view file, int number, std::string_view idea,
                       std::string_view call);

/// Whether todo() also names the call that goes there (exercise_grader --hint).
void show_hints(bool show);

/// Throws zl::Error when `features` ask for what the exercise engines leave out (overlap_comm,
/// buckets smaller than a unit, offload, ZeRO-3 prefetch and persistence): precision, loss
/// scaling, accumulation, clipping and schedules are all theirs.
void check_exercise_features(const TrainingFeatures& features);

/// Exercise 1 (ddp.cpp): every rank holds everything; gradients all-reduced.
std::unique_ptr<Engine> make_ddp(Model& model, Device& device, Comm& comm,
                                 const EngineOptions& options);
/// Exercise 2 (zero1.cpp): optimizer state sharded; gradients reduce-scattered after backward.
std::unique_ptr<Engine> make_zero1(Model& model, Device& device, Comm& comm,
                                   const EngineOptions& options);
/// Exercise 3 (zero2.cpp): gradients sharded too, reduce-scattered during backward.
std::unique_ptr<Engine> make_zero2(Model& model, Device& device, Comm& comm,
                                   const EngineOptions& options);
/// Exercise 4 (zero3.cpp): parameters sharded too, gathered for each visit of a unit.
std::unique_ptr<Engine> make_zero3(Model& model, Device& device, Comm& comm,
                                   const EngineOptions& options);

/// Level 1 gives these two, level 2 (level2/norm_and_update.cpp) asks for them; every exercise
/// engine ends its step with them. The canonical norm of the whole model's unscaled gradient, the
/// same bits on every rank: `grads` are this rank's whole units (`sharded` false, DDP) or its own
/// shards (ZeRO), in the training dtype, scaled by `loss_scale`.
double model_grad_norm(Comm& comm, Device& device, const std::vector<UnitLayout>& layout,
                 const std::vector<TypedSpan>& grads, double loss_scale, bool sharded);

/// Decides, clips by `grad_norm` and runs AdamW on `params` (the elements this rank owns) for
/// optimizer step `step`: true when the parameters were updated (engines/optimizer_step.hpp).
bool apply_update(double grad_norm, std::int64_t step, const std::vector<TypedSpan>& params,
            const std::vector<TypedSpan>& grads, OptimizerState& opt, const EngineOptions& options,
            Device& device);

/// The exercise engine of `kind` (Ddp, Zero1, Zero2 or Zero3): an EngineFactory.
std::unique_ptr<Engine> make_exercise_engine(EngineKind kind, Model& model, Device& device,
                                             Comm& comm, const EngineOptions& options);

/// What the exercise engines answer to a checkpoint request: they do not save or resume.
[[noreturn]] void no_checkpoints();

}  // namespace zl::exercise
