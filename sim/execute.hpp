// execute.hpp — carries out a collective once every rank has posted it: tile by tile straight from
// the inputs into every rank's output (split over threads when large), or through scratch first
// when buffers overlap in ways other than NCCL's in-place forms. Every reduction is
// comm/reduce.hpp's reduce_rank_order. Buffers in a registered CollectiveMemory (a GPU's) are
// handed to that space.
#pragma once

#include <cstddef>
#include <span>

#include "call_desc.hpp"

namespace zl {

/// Computes the collective that rank r posted as `calls[r]` and writes every rank's output.
/// The calls must agree (same_signature) and their buffers must stay valid until it returns.
void execute_collective(std::span<const CallDesc> calls);

/// The most threads one collective's data movement runs on (the caller's included): the
/// machine's hardware threads, at least 1. A collective uses them all once it moves enough bytes.
std::size_t max_collective_threads();

}  // namespace zl
