// reduce.hpp — the one definition of what a reduction computes, shared by every collective of
// the sim backend and by the reference engine. For each element i:
//   acc = in[0][i]; acc = acc + in[1][i]; ...; acc = acc + in[W-1][i]     (rank order, always)
//   Avg: acc = acc / W                                                     (one division, last)
// fp32 accumulates in float, fp64 in double; bf16 and fp16 accumulate in float and round to the
// 16-bit type once, at the end (nearest even). Max returns NaN if any input is NaN.
// Because the order is fixed per element, all_reduce == reduce_scatter + all_gather bitwise.
#pragma once

#include <cstddef>
#include <span>

#include "comm/comm.hpp"
#include "core/dtype.hpp"

namespace zl {

/// Writes into `out` the rank-order reduction of `inputs.size()` arrays of `count` elements.
/// `out` must not overlap any input.
void reduce_rank_order(std::span<const void* const> inputs, void* out, std::size_t count, DType dtype,
                       ReduceOp op);

}  // namespace zl
