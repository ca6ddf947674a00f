// execute.hpp — carries out a collective once every rank has posted it: all results go into
// scratch first (inputs may alias outputs: in-place all_reduce, broadcast and all_gather), then
// into every rank's output. Every reduction is comm/reduce.hpp's reduce_rank_order.
#pragma once

#include <span>

#include "call_desc.hpp"

namespace zl {

/// Computes the collective that rank r posted as `calls[r]` and writes every rank's output.
/// The calls must agree (same_signature) and their buffers must stay valid until it returns.
void execute_collective(std::span<const CallDesc> calls);

}  // namespace zl
