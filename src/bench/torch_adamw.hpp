// torch_adamw.hpp — runs scripts/bench_torch_adamw.py, which times torch.optim.AdamW on the CPU,
// or scripts/torch_adamw_bench.py, which times AdamW(fused=True) on the GPU, so `zerolab bench
// adam` can compare with PyTorch on the same machine in the same run. Never fails: when no Python
// can import torch, or the script fails, the result says why.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace zl::bench {

/// What the script measured, or why nothing was.
struct TorchAdamResult {
  bool ran = false;               ///< false: no script, no Python with torch, or the script failed
  std::string note;               ///< why not, when !ran
  std::string python;             ///< the interpreter that ran it
  std::string version;            ///< torch.__version__
  double single_tensor_ms = 0.0;  ///< torch.optim.AdamW(foreach=False), median ms per step()
  double foreach_ms = 0.0;        ///< torch.optim.AdamW(foreach=True), median ms per step()
};

/// Runs `script` with `python`, or with the first of python3 and /usr/bin/python3 that can
/// import torch when `python` is empty, on `params_elems` parameters with `threads` threads.
TorchAdamResult run_torch_adamw(const std::string& script, const std::string& python,
                                std::int64_t params_elems, int threads, int repeats);

/// What the GPU script measured (torch.optim.AdamW(fused=True) on CUDA), or why nothing was.
struct TorchCudaAdamResult {
  bool ran = false;        ///< false: no script, no Python with torch, or the script failed
  std::string note;        ///< why not, when !ran
  std::string python;      ///< the interpreter that ran it
  std::string version;     ///< torch.__version__
  double ms = 0.0;         ///< median ms per step(), CUDA events
  double best_ms = 0.0;    ///< fastest step()
  double gbps = 0.0;       ///< 28 bytes per parameter over the median, decimal GB/s
  double copy_gbps = 0.0;  ///< torch's device-to-device copy of the same bytes, read plus write
};

/// Runs `script` (scripts/torch_adamw_bench.py) with `python`, found as run_torch_adamw finds it,
/// on tensors of `tensor_elems` elements, with the CUDA benchmark's warm-up and timed steps.
TorchCudaAdamResult run_torch_adamw_cuda(const std::string& script, const std::string& python,
                                         const std::vector<std::int64_t>& tensor_elems, int warmup,
                                         int repeats);

}  // namespace zl::bench
