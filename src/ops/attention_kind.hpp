// attention_kind.hpp — which attention kernels a device runs (--attention, ZL_CUDA_ATTENTION):
// a choice the run configuration names and the CUDA device acts on.
#pragma once

namespace zl {

/// Which attention kernels a CUDA device runs (--attention, ZL_CUDA_ATTENTION). Exact: the tiled
/// kernels, the CPU device's bits. Fast: tensor cores, q, k, v and the probabilities rounded to
/// bf16 for the products with fp32 accumulation; repeatable bit for bit, within bf16's rounding
/// of the CPU (head sizes 16, 32 and 64). Gemm: cuBLAS fp32 GEMMs around a softmax, with
/// [heads, T, T] scratch (a bench's comparison). Default: Fast under --bf16 where it takes the
/// head size, else Exact. The CPU device runs Exact only.
enum class AttentionKind { Default, Exact, Fast, Gemm };

}  // namespace zl
