// grad_norm.hpp — the canonical global gradient norm, independent of the world size: the flat
// gradients are cut into fixed blocks of kNormBlockElems; each block's sum of squares is taken in
// fp64 in index order, and the blocks' partials are summed in block order. Shards are whole
// blocks, so a sharded engine computes the same partials and sums them in the same order.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace zl {

/// Elements per gradient-norm block. Independent of W.
inline constexpr std::int64_t kNormBlockElems = 64;

/// Appends one fp64 sum of squares per block of `grads` to `partials`.
/// `grads.size()` must be a multiple of kNormBlockElems.
void append_block_sumsq(std::span<const float> grads, std::vector<double>& partials);

/// The same sums, block i into partials[i]: `partials` holds exactly grads.size() /
/// kNormBlockElems doubles.
void block_sumsq(std::span<const float> grads, std::span<double> partials);

/// Throws zl::Error unless `grad_elems` are whole blocks and `partial_elems` is one per block:
/// block_sumsq's arguments, as every device checks them.
void check_block_sumsq(std::size_t grad_elems, std::size_t partial_elems);

/// `total` plus the partials, added in order: the norm's running sum, piece by piece.
double add_partials(double total, std::span<const double> partials);

/// sqrt of the partials summed in order (add_partials from zero).
double norm_from_partials(std::span<const double> partials);

}  // namespace zl
