// unit_buffers.hpp — the bookkeeping every engine shares: one padded flat buffer per unit (or one
// shard of it), views of own shards, the initial parameters, Adam's moments, the non-finite
// decision, and narration events.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "core/buffer.hpp"
#include "engines/engine.hpp"
#include "engines/partition.hpp"

namespace zl {

/// One buffer per unit, each `padded_elems` long (or `shard_elems` when sharded).
using UnitBuffers = std::vector<Buffer>;

/// One fp32 span per unit: whole unit buffers, or shards of them.
using UnitSpans = std::vector<std::span<float>>;

/// Allocates zeroed buffers of `dtype` of every unit's padded size (or shard size) under
/// `category`.
UnitBuffers alloc_units(Device& device, const std::vector<UnitLayout>& layout, MemCategory category,
                        bool shard = false, DType dtype = DType::F32);

/// Spans over whole buffers.
UnitSpans spans_of(UnitBuffers& buffers);

/// Rank `rank`'s shard of each full (padded) unit buffer.
UnitSpans own_shards(UnitBuffers& full, const std::vector<UnitLayout>& layout, int rank, int world);

/// Fills each unit's real elements with the model's fp32 init for `seed`, rounded to the
/// buffers' dtype (nearest even; 16-bit training starts from the rounded weights, as DeepSpeed's
/// fp32 master is made from the 16-bit model); padding stays zero.
void init_params(const Model& model, const std::vector<UnitLayout>& layout, UnitBuffers& params,
                 std::uint64_t seed, Device& device);

/// Sets every element of every buffer (of `device`) to +0.
void zero_units(Device& device, UnitBuffers& buffers);

/// Calls options.observer, if set, with the event and the device's ledger now.
void notify(const EngineOptions& options, const Device& device, std::string_view phase,
            int unit = -1);

/// Adam's two moments for a set of unit buffers (full or sharded), booked as Optimizer, and the
/// number of updates applied so far: bias correction uses it, so a skipped step does not count.
struct AdamState {
  UnitBuffers exp_avg;       ///< first moment m per unit, fp32, shaped like the params it updates
  UnitBuffers exp_avg_sq;    ///< second moment v per unit, fp32, same shapes
  std::int64_t updates = 0;  ///< AdamW steps applied (Adam's t; skipped steps excluded)
};

/// Zeroed moments shaped like alloc_units(device, layout, ..., shard), booked as `category`
/// (Optimizer, or HostOptimizer with ZeRO-Offload).
AdamState alloc_adam(Device& device, const std::vector<UnitLayout>& layout, bool shard = false,
                     MemCategory category = MemCategory::Optimizer);

/// The one non-finite decision, made from the canonical norm (the same bits on every rank): true
/// when step `step` (0-based) applies its update. A finite norm updates; a NaN or infinite one
/// throws NonFiniteError under NonFinitePolicy::Stop and returns false under Skip.
bool should_update(double grad_norm, std::int64_t step, const EngineOptions& options);

}  // namespace zl
