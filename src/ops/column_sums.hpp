// column_sums.hpp — the order in which both devices sum a column over many rows (bias gradients,
// LayerNorm's weight and bias gradients), so the CPU and CUDA devices give the same bits: the
// rows in chunks of kColumnSumChunkRows, each chunk summed in row order from zero, then the
// chunks' sums added in chunk order to a total that starts at zero, and the total added to the
// output once. On the GPU a block takes one chunk of a few columns, so the sums run in parallel
// over rows as well as columns; a column of at most one chunk is the plain row-order sum.
#pragma once

#include <cstdint>

namespace zl {

/// Rows of one chunk of a column sum.
inline constexpr std::int64_t kColumnSumChunkRows = 256;

/// Chunks of a column sum over `rows` rows (the last one partial).
inline constexpr std::int64_t column_sum_chunks(std::int64_t rows) {
  return (rows + kColumnSumChunkRows - 1) / kColumnSumChunkRows;
}

}  // namespace zl
