// adamw_fused.hpp — the fast path beside the reference AdamW kernel (adamw.hpp): one pass over
// p, g, m and v, vectorized, split into chunks over threads. Every element goes through exactly
// the reference's float operations in the reference's order, so the bits are the same for any
// thread count and any chunking (tests/optim/adamw_fused_test.cpp checks it).
#pragma once

#include <cstddef>
#include <span>

#include "optim/adamw.hpp"

namespace zl {

/// Spans shorter than this many elements per extra thread run on the calling thread alone:
/// starting a thread costs tens of microseconds, which small units never win back.
inline constexpr std::size_t kAdamMinElemsPerThread = std::size_t{1} << 16;

/// The same update as adamw_update(), bit for bit (a NaN result is NaN in both, but its sign and
/// payload may differ: the compiler may order a commutative operation's operands either way, and
/// x86 keeps the first NaN operand's), using up to `threads` threads (the calling
/// thread included; values below 1 count as 1), each with at least `min_elems_per_thread`
/// elements (tests pass 1 to split even tiny spans). Chunks are whole multiples of 64 elements
/// except the last, and no element depends on another, so chunk boundaries change no result.
/// Throws zl::Error when the spans' sizes disagree.
void adamw_update_fused(std::span<float> params, std::span<const float> grads,
                        std::span<float> exp_avg, std::span<float> exp_avg_sq,
                        const AdamWScalars& scalars, int threads,
                        std::size_t min_elems_per_thread = kAdamMinElemsPerThread);

/// The thread count the engines pass to adamw_update_fused() when above 1 (else the CPU device's
/// threads): the environment variable ZL_ADAM_THREADS (a positive integer, or "auto" for
/// std::thread::hardware_concurrency()), 1 when unset. Read once per process. Throws zl::Error naming the variable for any other value.
int adam_threads();

}  // namespace zl
