// adam_bench_cuda.hpp — `zerolab bench adam --accelerator cuda`: the fused multi-tensor AdamW
// (adamw_update_cuda) on N fp32 parameters split into GPT-2 124M's tensors, timed with CUDA
// events, as effective bandwidth at 28 bytes per parameter beside the GPU's own device-to-device
// copy bandwidth measured in the same run. Without CUDA built in, or with no GPU, it throws.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zl::bench {

/// Updates run and not timed before the timed ones (the first launch loads the kernel module).
inline constexpr int kCudaAdamWarmupUpdates = 3;

/// The tensor sizes AdamW updates for `params_elems` parameters: GPT-2 124M's parameter tensors
/// (the `124M` preset's gpt_units, 148 tensors, the LM head tied to wte) in order, cycled as often
/// as needed, the last one cut so the sizes add up to `params_elems`. Throws zl::Error for a
/// non-positive count.
std::vector<std::int64_t> gpt2_124m_tensor_elems(std::int64_t params_elems);

/// Parameters of the `124M` preset: the default size of the CUDA benchmark.
std::int64_t gpt2_124m_params_elems();

/// What to measure.
struct AdamCudaBenchOptions {
  std::int64_t params_elems = 0;  ///< fp32 parameters updated per call; 0: the 124M preset's
  int repeats = 10;               ///< timed updates (after kCudaAdamWarmupUpdates); median and best
};

/// What one run measured; times are CUDA event times on one stream.
struct AdamCudaBenchResult {
  std::string device;                      ///< cudaDeviceProp::name of GPU 0
  std::int64_t params_elems = 0;           ///< the size measured
  std::vector<std::int64_t> tensor_elems;  ///< how it was split (gpt2_124m_tensor_elems)
  int warmup = 0;                          ///< untimed updates before the timed ones
  int repeats = 0;                         ///< timed updates behind the median and the best
  double ms = 0.0;                         ///< adamw_update_cuda, median ms per update
  double best_ms = 0.0;                    ///< adamw_update_cuda, fastest update
  double gbps = 0.0;       ///< kAdamBytesPerParam * params / ms (median), decimal GB/s
  double best_gbps = 0.0;  ///< the same at best_ms
  /// Bytes of the device-to-device copy: 14 per parameter, so the copy reads and writes the same
  /// 28 bytes per parameter the update moves.
  std::int64_t copy_bytes = 0;
  double copy_ms = 0.0;    ///< cudaMemcpyAsync of copy_bytes, median ms
  double copy_gbps = 0.0;  ///< 2 * copy_bytes / copy_ms: read plus write, decimal GB/s
};

/// Times adamw_update_cuda over the tensors and a cudaMemcpyAsync of the same bytes on GPU 0,
/// alternating, after kCudaAdamWarmupUpdates untimed rounds. Throws zl::Error saying why when
/// this zerolab was built without CUDA or no GPU is visible, and for a non-positive count.
AdamCudaBenchResult run_adam_bench_cuda(const AdamCudaBenchOptions& options);

}  // namespace zl::bench
