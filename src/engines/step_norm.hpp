// step_norm.hpp — the gradient norm of a step (optim/grad_norm.hpp's canonical norm) from the
// engines' gradients on the device: each unit's block partials, summed on the device into the
// largest tree nodes inside what the rank holds; the host reads a few doubles per unit, and a
// sharded engine all-gathers them first, so every rank and the reference get the same bits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "comm/comm.hpp"
#include "core/buffer.hpp"
#include "engines/partition.hpp"
#include "engines/typed_span.hpp"
#include "ops/device.hpp"

namespace zl {

/// The gradient norm's block partials (optim/grad_norm.hpp) of a rank's gradients, unit after
/// unit, in the device's memory (booked as CommBuffer), where the device sums them into a few tree
/// nodes per unit, so a step reads those sums to the host once.
struct NormPartials {
  Buffer partials;                        ///< fp64, one per block of kNormBlockElems
  std::vector<std::int64_t> unit_blocks;  ///< how many of them each unit has, unit after unit
  Device* device;                         ///< whose memory holds them
};

/// Block partials of the unscaled fp32 gradients, unit after unit.
NormPartials unscaled_partials(const std::vector<TypedSpan>& grads, double loss_scale,
                               Device& device);

/// Each unit's tree_cover sums (optim/grad_norm.hpp) of its partials, which are its leaves from
/// first_leaf[u] on, summed on the device into slots[u] places a unit (at least its cover's
/// nodes; the places after them are left unset), unit after unit, booked as CommBuffer.
Buffer cover_sums(const NormPartials& partials, std::span<const std::int64_t> first_leaf,
                  std::span<const std::int64_t> slots);

/// The canonical norm of whole units' partials in device memory: their tree sums on the device,
/// one copy of a few sums per unit to the host, where the units' sums are added in order.
double norm_from_partials(const NormPartials& partials);

/// The doubles each rank contributes to sharded_grad_norm's all_gather on `world` ranks: for
/// each unit, the most tree nodes any rank's shard of it holds.
std::int64_t norm_sums_per_rank(const std::vector<UnitLayout>& layout, int world);

/// The canonical global gradient norm from each rank's block partials of its own gradient shards
/// (unit after unit): each rank's device sums the largest tree nodes inside its shard of each unit
/// (optim/grad_norm.hpp), every rank shares those sums (one all_gather of at most two doubles a
/// tree level per unit and rank), and all ranks add the nodes above them in the unsharded unit's
/// tree, then the units in order, so the norm equals the norm of the full averaged gradients bit
/// for bit. Collective.
double sharded_grad_norm(Comm& comm, Device& device, const std::vector<UnitLayout>& layout,
                         const NormPartials& own_partials);

}  // namespace zl
