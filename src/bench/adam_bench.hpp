// adam_bench.hpp — `zerolab bench adam`: the fused AdamW kernel's time per update on N fp32
// parameters, as effective bandwidth at 28 bytes per parameter (read p, g, m, v; write p, m, v),
// beside the machine's STREAM triad bandwidth measured in the same run with the same threads.
#pragma once

#include <cstdint>

namespace zl::bench {

/// Bytes AdamW moves per fp32 parameter: reads p, g, m, v and writes p, m, v, 4 bytes each.
inline constexpr double kAdamBytesPerParam = 28.0;
/// Bytes STREAM counts per triad element a[i] = b[i] + s * c[i] in fp64: two reads, one write.
inline constexpr double kTriadBytesPerElem = 24.0;

/// What to measure.
struct AdamBenchOptions {
  std::int64_t params_elems = 50'000'000;  ///< fp32 parameters updated per call
  int threads = 0;            ///< 0: std::thread::hardware_concurrency()
  int repeats = 10;           ///< timed updates (after one warm-up); the median is reported
  int reference_repeats = 3;  ///< timed updates of the scalar reference on one thread; 0: skip
};

/// Medians of one run.
struct AdamBenchResult {
  std::int64_t params_elems = 0;  ///< the size measured
  int threads = 0;                ///< threads used (hardware_concurrency() when asked for 0)
  int repeats = 0;                ///< timed updates behind each median
  double ms = 0.0;            ///< adamw_update_fused, median ms per update
  double gbps = 0.0;          ///< kAdamBytesPerParam * params / ms, decimal GB/s
  double triad_gbps = 0.0;    ///< STREAM triad, same threads, kTriadBytesPerElem per element
  double reference_ms = 0.0;  ///< adamw_update (scalar, one thread), median; 0 when skipped
};

/// Times the fused kernel and the STREAM triad (a[i] = b[i] + s * c[i] over fp64 arrays of
/// `params_elems` elements), alternating, then (unless skipped) the reference. Throws zl::Error
/// for a non-positive size or count.
AdamBenchResult run_adam_bench(const AdamBenchOptions& options);

}  // namespace zl::bench
