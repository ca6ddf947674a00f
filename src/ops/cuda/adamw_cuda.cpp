// adamw_cuda.cpp — the host side of the multi-tensor AdamW: argument checks, then one kernel
// launch (adamw_cuda.cu) per kAdamWTensorsPerLaunch tensors.
#include "ops/cuda/adamw_cuda.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "ops/cuda/cuda_kernels.hpp"

namespace zl {

void adamw_update_cuda(std::span<const AdamWTensor> tensors, const AdamWScalars& scalars,
                       cudaStream_t stream, AdamWGradRead read) {
  ZL_CHECK(read.half == DType::BF16 || read.half == DType::F16,
           "AdamW's 16-bit gradients and copies are bf16 or fp16, not {}", dtype_name(read.half));
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const AdamWTensor& t = tensors[i];
    ZL_CHECK(t.elems >= 0, "AdamW tensor {} has {} elements: pass a size >= 0", i, t.elems);
    ZL_CHECK(
        t.elems == 0 || (t.master != nullptr && (t.grads != nullptr || t.grads_half != nullptr) &&
                         t.exp_avg != nullptr && t.exp_avg_sq != nullptr),
        "AdamW tensor {} of {} elements has a null master, gradient or moment pointer: pass "
        "all four",
        i, t.elems);
  }
  for (std::size_t first = 0; first < tensors.size(); first += kAdamWTensorsPerLaunch) {
    const std::size_t count = std::min<std::size_t>(kAdamWTensorsPerLaunch, tensors.size() - first);
    cuda::adamw_launch(tensors.data() + first, static_cast<int>(count), scalars, read, stream);
  }
}

}  // namespace zl
