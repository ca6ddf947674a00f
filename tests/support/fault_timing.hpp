// fault_timing.hpp — the collective timeout and the time bound that the fault tests share. A
// healthy rank must reach every call well within the timeout even on a loaded machine (under
// ThreadSanitizer on a slow CI machine, healthy ranks have reached their first call more than
// 200 ms after the others), so only a rank held back on purpose ever times out.
#pragma once

#include <chrono>

namespace zl {

/// The collective timeout of runs where a rank is made late on purpose (and of the other fault
/// runs, where no timeout should fire at all).
inline constexpr auto kFaultTimeout = std::chrono::milliseconds(1000);

/// The shortest collective timeout the fault tests use (a stalled rank must still be caught): 1 ms,
/// or 10 ms under ThreadSanitizer, which slows the code between a rank thread's start and its
/// first call about tenfold, and under AddressSanitizer, where a 2-core machine running two test
/// processes and a build at once had a healthy rank miss 1 ms.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
inline constexpr auto kShortestTimeout = std::chrono::milliseconds(10);
#else
inline constexpr auto kShortestTimeout = std::chrono::milliseconds(1);
#endif

/// How long a faulty run may take before the test calls it a hang: a failed run ends about one
/// timeout after the fault, so this leaves a tenfold margin for a slow machine.
inline constexpr double kFaultBoundSeconds = 10.0;

}  // namespace zl
