// data.hpp — synthetic classification data generated from the seed by a counter-based RNG, so
// sample g is the same for every world size and backend. Class centers are N(0, 1) points in
// `features` dimensions; sample g has label y ~ U{0..classes-1} and x = center[y] + noise * N(0, 1).
// A step's global batch is W micro-batches: step t, rank r, row b uses sample (t*W + r)*B + b.
#pragma once

#include <cstdint>

#include "model/model.hpp"

namespace zl {

/// The Gaussian-mixture classification task.
struct ClassificationTask {
  std::int64_t features = 16;  ///< inputs per sample (the MLP's `in`)
  std::int64_t classes = 8;    ///< labels are uniform in [0, classes), one Gaussian center each
  std::uint64_t seed = 0;      ///< fixes labels, centers and noise; the same for every W
  float noise = 1.0f;          ///< standard deviation of the N(0, 1) jitter added to the center

  /// Samples first_sample .. first_sample + rows - 1.
  Batch batch(std::int64_t first_sample, std::int64_t rows) const;
};

/// Global index of the first sample rank `rank` uses at step `step` (0-based).
inline std::int64_t first_sample_of(std::int64_t step, int rank, int world, std::int64_t micro_batch) {
  return (step * world + rank) * micro_batch;
}

}  // namespace zl
