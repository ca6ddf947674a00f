// quantized_comm.hpp — ZeRO++'s quantized communication for the engines: qwZ's int8 parameter
// gather and qgZ's int4 gradient reduce (comm/quantized_collectives.hpp) on a unit's buffers in
// the training dtype. The values pass through the host, widened to fp32, and come back rounded
// to the training dtype. Not bitwise the reference by nature: deterministic, and within the
// quantizer's bound of each block (docs/exactness.md).
#pragma once

#include <cstdint>

#include "comm/comm.hpp"
#include "core/buffer.hpp"
#include "engines/partition.hpp"
#include "engines/shard_groups.hpp"
#include "engines/typed_span.hpp"
#include "ops/device.hpp"

namespace zl {

/// Elements of one quantization block, for weights and gradients alike: each has its own fp32
/// scale (1.6% more bytes for int8, 3.1% for int4).
inline constexpr std::int64_t kQuantBlockElems = 256;

/// qwZ: unit `unit`'s whole padded buffer in `shard`'s dtype, booked as gathered parameters, from
/// every rank's shard quantized to int8 in blocks of kQuantBlockElems (quantized_all_gather), each
/// value rounded to the dtype. Collective over `comm`.
Buffer gather_unit_quantized(Comm& comm, Device& device, const UnitLayout& unit, TypedSpan shard);

/// qgZ: this rank's shard of the world's average of the ranks' `grad` (a unit's full gradient),
/// int4-quantized in blocks of kQuantBlockElems at both of `groups`' levels (the nodes, then the
/// ranks of one local rank across them: quantized_reduce_scatter_sum), divided by W in fp32 and
/// rounded once to the dtype; written into `shard` on the first micro-batch, added to it
/// (add_into's rounding) after. Collective over both groups.
void reduce_into_shard_quantized(ShardGroups& groups, Device& device, TypedSpan grad,
                                 TypedSpan shard, bool first_micro_batch);

}  // namespace zl
