// reduce_cuda.hpp — the rank-order reduction of comm/reduce.hpp on device memory, for a simulator
// whose ranks are threads sharing one GPU: per element, acc = in[0]; acc = acc + in[1]; ...;
// acc = acc + in[W-1], then one division by W for Avg; fp32 in float, fp64 in double, bf16 and
// fp16 in float rounded once at the end; Max returns NaN if any input is NaN. Every operation is
// IEEE-rounded (__fadd_rn and friends), so the bits are reduce_rank_order's.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <span>

#include "comm/comm.hpp"
#include "core/dtype.hpp"

namespace zl {

/// Ranks one reduction takes (their pointers travel as the kernel's argument).
inline constexpr int kReduceMaxRanks = 64;

/// Writes into `out` the rank-order reduction of the `inputs.size()` device arrays of `count`
/// elements, queued on `stream`. `inputs` is a host array of device pointers; `out` must not
/// overlap an input. Throws zl::Error for zero or more than kReduceMaxRanks inputs and for int64
/// (as reduce_rank_order does).
void reduce_rank_order_cuda(std::span<const void* const> inputs, void* out, std::size_t count,
                            DType dtype, ReduceOp op, cudaStream_t stream);

}  // namespace zl
