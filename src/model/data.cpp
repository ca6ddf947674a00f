// data.cpp — the Gaussian-mixture task: every label, center and noise value is a pure function
// of (seed, stream, index), so sample g is the same however the global batch is cut into ranks.
#include "model/data.hpp"

#include "core/error.hpp"
#include "core/rng.hpp"

namespace zl {

Batch ClassificationTask::batch(std::int64_t first_sample, std::int64_t rows) const {
  ZL_CHECK(features >= 1 && classes >= 1,
           "a task with {} features and {} classes is invalid: both need to be >= 1", features,
           classes);
  ZL_CHECK(first_sample >= 0 && rows >= 0,
           "samples {} .. {} are invalid: the first sample and the row count need to be >= 0",
           first_sample, first_sample + rows - 1);
  const std::uint64_t label_stream = stream_of("data.label");
  const std::uint64_t center_stream = stream_of("data.center");
  const std::uint64_t noise_stream = stream_of("data.noise");
  const auto feature_count = static_cast<std::uint64_t>(features);

  Batch out{.rows = rows, .features = features, .x = {}, .y = {}, .tokens = {}};
  out.x.resize(static_cast<std::size_t>(rows * features));
  out.y.resize(static_cast<std::size_t>(rows));
  for (std::int64_t b = 0; b < rows; ++b) {
    const auto g = static_cast<std::uint64_t>(first_sample + b);
    const std::uint64_t label =
        uniform_below(seed, label_stream, g, static_cast<std::uint64_t>(classes));
    out.y[b] = static_cast<std::int64_t>(label);
    // x row b is [features]: center[label] + noise * N(0, 1), one fresh normal per (g, j).
    for (std::uint64_t j = 0; j < feature_count; ++j) {
      const float center = standard_normal(seed, center_stream, label * feature_count + j);
      const float jitter = standard_normal(seed, noise_stream, g * feature_count + j);
      out.x[static_cast<std::size_t>(b) * feature_count + j] = center + noise * jitter;
    }
  }
  return out;
}

}  // namespace zl
