// unit_buffers.hpp — the bookkeeping engines share: one padded flat buffer per unit, the
// forward/backward loop over units, and the canonical gradient norm over unit buffers.
#pragma once

#include <span>
#include <vector>

#include "core/buffer.hpp"
#include "engines/engine.hpp"
#include "engines/partition.hpp"

namespace zl {

/// One buffer per unit, each `padded_elems` long (or `shard_elems` when `shard` is set).
using UnitBuffers = std::vector<Buffer>;

/// Allocates zeroed fp32 buffers of every unit's padded size (or shard size) under `category`.
UnitBuffers alloc_units(Device& device, const std::vector<UnitLayout>& layout, MemCategory category,
                        bool shard = false);

/// Fills each unit's real elements with the model's init for `seed`; padding stays zero.
void init_params(const Model& model, const std::vector<UnitLayout>& layout, UnitBuffers& params,
                 std::uint64_t seed);

/// Sets every element of every buffer to +0.
void zero_units(UnitBuffers& buffers);

/// Runs one micro-batch forward and backward over all units; gradients are added into `grads`.
/// Returns the micro-batch loss.
float forward_backward(Model& model, const Batch& batch, const std::vector<UnitLayout>& layout,
                       const UnitBuffers& params, UnitBuffers& grads);

/// Canonical global norm (optim/grad_norm.hpp) of full, padded unit gradients.
double grad_norm_of(const UnitBuffers& grads);

/// Copies the real (unpadded) elements of each unit into plain vectors.
std::vector<std::vector<float>> unpadded_copy(const std::vector<UnitLayout>& layout,
                                              const UnitBuffers& buffers);

/// Adam's two moments for a set of unit buffers (full or sharded), booked as Optimizer.
struct AdamState {
  UnitBuffers exp_avg;
  UnitBuffers exp_avg_sq;
};

/// Zeroed moments shaped like alloc_units(device, layout, ..., shard).
AdamState alloc_adam(Device& device, const std::vector<UnitLayout>& layout, bool shard = false);

/// AdamW step `step` (1-based) on every unit buffer: params[u] from grads[u] and the moments.
void adamw_units(UnitBuffers& params, const UnitBuffers& grads, AdamState& adam,
                 const AdamWConfig& config, std::int64_t step);

/// Unpadded copies of full (unsharded) params and moments.
ModelState model_state(const std::vector<UnitLayout>& layout, const UnitBuffers& params,
                       const AdamState& adam);

}  // namespace zl
