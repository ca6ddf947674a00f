// cpu_kernels.hpp — how the CPU kernels share out their loops (private to src/ops/cpu): a loop
// over elements or rows is cut into pieces whose size depends on the shape alone, and the pieces
// run on the device's threads. A piece writes only its own elements, and every sum across pieces
// is combined afterwards in piece order, so the bits never depend on the thread count.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include "ops/column_sums.hpp"
#include "ops/cpu/cpu_thread_pool.hpp"

namespace zl::cpu {

/// Elements per piece of an element-wise loop: enough work to be worth a hand-off (Grain::Fine:
/// a few).
inline std::int64_t piece_elems(const CpuThreadPool& pool) {
  return pool.grain() == Grain::Fine ? 16 : std::int64_t{1} << 14;
}

/// Columns per piece of a loop that sums columns over every row.
inline std::int64_t columns_per_piece(const CpuThreadPool& pool) {
  return pool.grain() == Grain::Fine ? 3 : 64;
}

/// Rows per piece of a loop over rows of `row_elems` elements: about piece_elems() elements.
inline std::int64_t rows_per_piece(const CpuThreadPool& pool, std::int64_t row_elems) {
  return std::max<std::int64_t>(1, piece_elems(pool) / std::max<std::int64_t>(1, row_elems));
}

/// Calls body(begin, end) for [0, count) cut into pieces of `per_piece` (the last one shorter),
/// on `pool`'s threads.
template <typename Body>
void for_each_piece(CpuThreadPool& pool, std::int64_t count, std::int64_t per_piece,
                    const Body& body) {
  const std::int64_t pieces = (count + per_piece - 1) / per_piece;
  pool.run(pieces, [&](std::int64_t piece) {
    const std::int64_t begin = piece * per_piece;
    body(begin, std::min(count, begin + per_piece));
  });
}

/// for_each_piece with piece_elems() elements per piece.
template <typename Body>
void for_each_piece(CpuThreadPool& pool, std::int64_t count, const Body& body) {
  for_each_piece(pool, count, piece_elems(pool), body);
}

/// y[r, o] += b[o] for every row r of y [rows, out].
inline void add_bias_rows(CpuThreadPool& pool, std::span<const float> b, std::span<float> y,
                          std::int64_t rows, std::int64_t out) {
  for_each_piece(pool, rows, rows_per_piece(pool, out), [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      for (std::int64_t o = 0; o < out; ++o) y[r * out + o] += b[o];
    }
  });
}

/// db[o] += (dy[0, o] + dy[1, o] + ...): each column of dy [rows, out] summed in float from row 0
/// down, then added to db once; pieces of columns.
inline void add_column_sums(CpuThreadPool& pool, std::span<const float> dy, std::span<float> db,
                            std::int64_t rows, std::int64_t out) {
  for_each_piece(pool, out, columns_per_piece(pool), [&](std::int64_t begin, std::int64_t end) {
    const auto width = static_cast<std::size_t>(end - begin);
    std::vector<float> sums(width, 0.0f), chunk(width);
    // ops/column_sums.hpp's order: each chunk of rows from zero, then the chunks in order
    for (std::int64_t first = 0; first < rows; first += kColumnSumChunkRows) {
      std::fill(chunk.begin(), chunk.end(), 0.0f);
      for (std::int64_t r = first; r < std::min(rows, first + kColumnSumChunkRows); ++r) {
        const float* row = dy.data() + r * out + begin;
        for (std::size_t o = 0; o < width; ++o) chunk[o] += row[o];
      }
      for (std::size_t o = 0; o < width; ++o) sums[o] += chunk[o];
    }
    for (std::int64_t o = begin; o < end; ++o) db[o] += sums[o - begin];
  });
}

}  // namespace zl::cpu
