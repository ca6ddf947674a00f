// micro_batch.hpp — one micro-batch through the model, unit by unit, as every engine and the
// reference run it: forward over Model::forward_order(), the loss, backward over the reverse.
// Parameters come from the engine for each visit (its own buffer, or a gathered temporary) and
// go to the model in the training dtype, as they are kept. Each unit's fp32 gradient adds up over
// its visits; once its last backward visit is done it is rounded to the training dtype and handed
// to the engine, which reduces it.
#pragma once

#include <functional>
#include <span>
#include <vector>

#include "engines/engine.hpp"
#include "engines/partition.hpp"
#include "engines/typed_span.hpp"

namespace zl {

/// A unit's full (padded) parameters for one visit: a view of a buffer the engine keeps, or a
/// gathered temporary (`owned`) that lives until the visit ends.
struct UnitParams {
  TypedSpan view;  ///< the padded parameters in the training dtype; what the model reads
  Buffer owned;    ///< the gathered buffer `view` points into (ZeRO-3), or empty for a kept one
};

/// What the engine supplies and receives during a micro-batch.
struct MicroBatchHooks {
  /// Full parameters of `unit` for a forward (`backward` false) or backward visit.
  std::function<UnitParams(int unit, bool backward)> params;
  /// Optional: the engine's own full gradient buffer of `unit` (padded, in the training dtype),
  /// where the micro-batch leaves the unit's gradient: in fp32 backward adds into it directly,
  /// zeroed at the unit's first backward visit; in 16 bits the fp32 gradient is rounded into it
  /// once complete. Then grad_ready gets this buffer and nothing is copied. Empty: temporaries.
  std::function<TypedSpan(int unit)> grad_buffer;
  /// Unit `unit`'s gradient for this micro-batch is complete: full and padded, in the training
  /// dtype. The span stays valid only during the call (unless it is grad_buffer's); the engine
  /// may modify it (reduce in place).
  std::function<void(int unit, TypedSpan grad)> grad_ready;
};

/// Runs `batch` forward and backward, seeding backward with `grad_scale` (see Model::loss), and
/// emits "forward" and "backward" events per visit. The unscaled loss is added into loss_sum[0]
/// (one float in the device's memory, Model::add_loss), which the host reads once a step.
void run_micro_batch(Model& model, const Batch& batch, const std::vector<UnitLayout>& layout,
                     DType precision, float grad_scale, const MicroBatchHooks& hooks,
                     const EngineOptions& options, Device& device, std::span<float> loss_sum);

}  // namespace zl
