// adamw_cuda.cu — the fused multi-tensor AdamW kernel and its launch (the checks and the split
// into launches: adamw_cuda.cpp): blockIdx.y picks the tensor, a grid-stride loop over blockIdx.x
// covers its elements. Memory-bound: each element reads g, p, m, v and writes
// p, m, v and the 16-bit copy (18 or 16 bytes in, 14 out), all coalesced.
#include <algorithm>
#include <cstdint>

#include "ops/cuda/adamw_cuda.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_dtype.cuh"
#include "ops/cuda/cuda_kernels.hpp"

namespace zl {

namespace {

constexpr int kThreads = 256;
constexpr std::int64_t kMaxBlocksPerTensor = 2048;

struct AdamWLaunch {
  AdamWTensor tensors[kAdamWTensorsPerLaunch];
  AdamWScalars scalars;
  AdamWGradRead read;
};
static_assert(sizeof(AdamWLaunch) <= 4096, "the launch's argument must stay under 4 KiB");

__global__ void adamw_kernel(AdamWLaunch launch) {
  const AdamWTensor& tensor = launch.tensors[blockIdx.y];
  const AdamWScalars& s = launch.scalars;
  const float neg_step_size = -s.step_size;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < tensor.elems; i += stride) {
    // adamw_update() (optim/adamw.cpp), one IEEE-rounded operation at a time.
    // The gradient as read: widened, unscaled, clipped (Device::adamw_update_unscaled).
    const bool fp16 = launch.read.half == DType::F16;
    float g = tensor.grads_half == nullptr ? tensor.grads[i]
              : fp16                       ? cuda::from_f16(tensor.grads_half[i])
                                           : cuda::from_bf16(tensor.grads_half[i]);
    if (launch.read.divisor != 1.0f) g = __fdiv_rn(g, launch.read.divisor);
    if (launch.read.clip != 1.0f) g = __fmul_rn(g, launch.read.clip);
    const float m =
        __fadd_rn(__fmul_rn(tensor.exp_avg[i], s.beta1), __fmul_rn(s.one_minus_beta1, g));
    const float v = __fadd_rn(__fmul_rn(tensor.exp_avg_sq[i], s.beta2),
                              __fmul_rn(s.one_minus_beta2, __fmul_rn(g, g)));
    const float denom = __fadd_rn(__fdiv_rn(__fsqrt_rn(v), s.bias2_sqrt), s.eps);
    const float p = __fadd_rn(__fmul_rn(tensor.master[i], s.decay),
                              __fmul_rn(neg_step_size, __fdiv_rn(m, denom)));
    tensor.master[i] = p;
    tensor.exp_avg[i] = m;
    tensor.exp_avg_sq[i] = v;
    if (tensor.params_half != nullptr) {
      tensor.params_half[i] = fp16 ? cuda::to_f16(p) : cuda::to_bf16(p);
    }
  }
}

}  // namespace

void cuda::adamw_launch(const AdamWTensor* tensors, int count, const AdamWScalars& scalars,
                        AdamWGradRead read, cudaStream_t stream) {
  AdamWLaunch launch{};
  launch.scalars = scalars;
  launch.read = read;
  std::int64_t max_elems = 0;
  for (int i = 0; i < count; ++i) {
    launch.tensors[i] = tensors[i];
    max_elems = std::max(max_elems, tensors[i].elems);
  }
  if (max_elems == 0) return;
  const std::int64_t blocks = std::min(kMaxBlocksPerTensor, (max_elems + kThreads - 1) / kThreads);
  const dim3 grid(static_cast<unsigned int>(blocks), static_cast<unsigned int>(count));
  adamw_kernel<<<grid, kThreads, 0, stream>>>(launch);
  cuda_check_launch("adamw_update_cuda");
}

}  // namespace zl
