// timing.hpp — the few timing helpers every benchmark shares (with core/steady_ms.hpp's clock):
// the median of samples, and bandwidth in decimal GB/s (10^9 bytes per second, as STREAM and
// nccl-tests report it).
#pragma once

#include <algorithm>
#include <cstddef>
#include <utility>
#include <vector>

#include "core/steady_ms.hpp"

namespace zl::bench {

/// The median of `samples` (the mean of the middle two for an even count); 0 when empty.
inline double median(std::vector<double> samples) {
  if (samples.empty()) return 0.0;
  std::sort(samples.begin(), samples.end());
  const std::size_t mid = samples.size() / 2;
  if (samples.size() % 2 == 1) return samples[mid];
  return (samples[mid - 1] + samples[mid]) / 2.0;
}

/// median() of times in ms.
inline double median_ms(std::vector<double> samples_ms) {
  return median(std::move(samples_ms));
}

/// Decimal GB/s of `bytes` moved in `ms` milliseconds; 0 when `ms` is not positive.
inline double gbps(double bytes, double ms) {
  return ms > 0.0 ? bytes / (ms * 1e6) : 0.0;
}

}  // namespace zl::bench
