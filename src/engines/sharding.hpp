// sharding.hpp — the collective pieces the ZeRO stages share: gathering a unit from its shards,
// the canonical gradient norm from gradient shards, and assembling full state for export.
#pragma once

#include <span>
#include <vector>

#include "comm/comm.hpp"
#include "engines/unit_buffers.hpp"

namespace zl {

/// all_gather of unit `unit`'s shards into a new full, padded buffer booked as `category`
/// (Gathered for ZeRO-3's temporaries). Collective.
Buffer gather_unit(Comm& comm, Device& device, const UnitLayout& unit, std::span<const float> shard,
                   MemCategory category = MemCategory::Gathered);

/// reduce_scatter(avg) of a unit's full gradient: this rank receives its averaged shard.
/// `shard` may be this rank's slice of `full` (in place, as NCCL allows). Collective.
void reduce_scatter_unit(Comm& comm, std::span<const float> full, std::span<float> shard);

/// The canonical global gradient norm from each rank's own gradient shards: every rank shares
/// its per-block fp64 partials (one all_gather of Psi_padded / kNormBlockElems doubles in all),
/// then all ranks sum them in the unreduced model's block order, so the norm equals
/// grad_norm_of(full averaged gradients) bit for bit. The partials travel in CommBuffer memory.
/// Collective.
double sharded_grad_norm(Comm& comm, Device& device, const std::vector<UnitLayout>& layout,
                         const UnitSpans& grad_shards);

/// all_gather of every unit's parameters in place: each rank contributes its freshly updated
/// shard of `params` (full unit buffers) and ends with them whole. Emits an "all_gather" event
/// per unit. Collective.
void all_gather_params(Comm& comm, UnitBuffers& params, const std::vector<UnitLayout>& layout,
                       const EngineOptions& options, const Device& device);

/// Full unpadded copies of sharded buffers, assembled with one all_gather per unit. Collective.
std::vector<std::vector<float>> gather_unpadded(Comm& comm, Device& device,
                                                const std::vector<UnitLayout>& layout,
                                                const UnitSpans& shards);

/// Copies of `shards` (one span per unit).
std::vector<std::vector<float>> copy_shards(const UnitSpans& shards);

/// Writes `values[u]` into `shards[u]` for every unit; sizes must match.
void assign_shards(const UnitSpans& shards, const std::vector<std::vector<float>>& values);

/// Fills whole unit buffers from `values` (this rank's shards): writes the own slice, then
/// all-gathers the rest in place. Collective.
void load_full_from_shards(Comm& comm, UnitBuffers& full, const std::vector<UnitLayout>& layout,
                           const std::vector<std::vector<float>>& values);

/// This rank's shard state of an engine with whole parameters and sharded Adam (ZeRO-1, ZeRO-2).
ShardState shard_state_with_sharded_adam(const Comm& comm, const std::vector<UnitLayout>& layout,
                                         UnitBuffers& params, AdamState& adam);

/// Loads `state` into an engine with whole parameters and sharded Adam: the own parameter shard
/// is written and the rest all-gathered; the moments are the own shards. Collective.
void load_state_with_sharded_adam(Comm& comm, const std::vector<UnitLayout>& layout,
                                  UnitBuffers& params, AdamState& adam, const ShardState& state);

/// Full state of an engine with whole parameters and sharded Adam moments (ZeRO-1, ZeRO-2).
/// Collective.
ModelState state_with_sharded_adam(Comm& comm, Device& device,
                                   const std::vector<UnitLayout>& layout, UnitBuffers& params,
                                   AdamState& adam);

}  // namespace zl
