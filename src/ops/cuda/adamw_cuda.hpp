// adamw_cuda.hpp — the fused multi-tensor AdamW on the GPU: one launch updates up to
// kAdamWTensorsPerLaunch tensors (fp32 master weights, gradients in fp32 or 16 bits, m and v),
// and writes the 16-bit (bf16 or fp16) training copy of each parameter as it goes. Every element
// goes through adamw_update()'s float operations in its order (optim/adamw.hpp), each rounded as
// IEEE says (__fmul_rn, __fadd_rn, __fdiv_rn, __fsqrt_rn: no fused multiply-add), so the GPU gives
// the CPU's bits.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <span>

#include "core/dtype.hpp"
#include "optim/adamw.hpp"

namespace zl {

/// One tensor of a multi-tensor AdamW step; all pointers are device memory of `elems` elements.
struct AdamWTensor {
  float* master = nullptr;               ///< fp32 master weights, updated in place
  const float* grads = nullptr;          ///< fp32 gradients (already reduced)
  /// 16-bit gradients (AdamWGradRead::half), read instead of `grads` when set
  const std::uint16_t* grads_half = nullptr;
  float* exp_avg = nullptr;              ///< Adam's first moment m, updated in place
  float* exp_avg_sq = nullptr;           ///< Adam's second moment v, updated in place
  /// 16-bit copy of the updated master (AdamWGradRead::half; nullptr: none)
  std::uint16_t* params_half = nullptr;
  std::int64_t elems = 0;                ///< elements of each of the above
};

/// Tensors one kernel launch takes (their descriptors travel as the kernel's argument, which
/// stays under the 4 KiB every CUDA version accepts).
inline constexpr int kAdamWTensorsPerLaunch = 64;

/// What the update does to each gradient as it reads it (Device::adamw_update_unscaled): widened
/// from 16 bits if it is, divided by `divisor` unless it is 1, multiplied by `clip` unless it is
/// 1; and the 16-bit format of the gradients and parameter copies.
struct AdamWGradRead {
  float divisor = 1.0f;      ///< the loss scale (1: none)
  float clip = 1.0f;         ///< the clipping factor (1: none)
  DType half = DType::BF16;  ///< of grads_half and params_half: BF16 or F16
};

/// One AdamW step over every tensor, queued on `stream` (one launch per kAdamWTensorsPerLaunch
/// tensors): per element, the gradient read as `read` says (one IEEE division, one multiply),
/// then exactly adamw_update()'s operations; then params_half = the new master rounded to nearest
/// even (f32_to_bf16's or f32_to_f16's bits, NaN kept quiet with its sign). Throws zl::Error naming
/// the tensor when a pointer is null while its elems is not zero.
void adamw_update_cuda(std::span<const AdamWTensor> tensors, const AdamWScalars& scalars,
                       cudaStream_t stream, AdamWGradRead read = {});

}  // namespace zl
