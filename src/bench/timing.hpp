// timing.hpp — the few timing helpers every benchmark shares (with core/steady_ms.hpp's clock):
// the median of samples, and bandwidth in decimal GB/s (10^9 bytes per second, as STREAM and
// nccl-tests report it).
#pragma once

#include <algorithm>
#include <cstddef>
#include <vector>

#include "core/steady_ms.hpp"

namespace zl::bench {

/// The median of `samples_ms` (the mean of the middle two for an even count); 0 when empty.
inline double median_ms(std::vector<double> samples_ms) {
  if (samples_ms.empty()) return 0.0;
  std::sort(samples_ms.begin(), samples_ms.end());
  const std::size_t mid = samples_ms.size() / 2;
  if (samples_ms.size() % 2 == 1) return samples_ms[mid];
  return (samples_ms[mid - 1] + samples_ms[mid]) / 2.0;
}

/// Decimal GB/s of `bytes` moved in `ms` milliseconds; 0 when `ms` is not positive.
inline double gbps(double bytes, double ms) {
  return ms > 0.0 ? bytes / (ms * 1e6) : 0.0;
}

}  // namespace zl::bench
