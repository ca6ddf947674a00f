// steady_ms.hpp — wall time in milliseconds on the steady clock: what the benchmarks, the steps'
// times and the swap files' busy times are measured with.
#pragma once

#include <chrono>

namespace zl {

/// Milliseconds on the steady clock since an arbitrary origin: subtract two.
inline double steady_ms() {
  return std::chrono::duration<double, std::milli>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace zl
