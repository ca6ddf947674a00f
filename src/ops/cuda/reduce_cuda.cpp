// reduce_cuda.cpp — the host side of the device rank-order reduction: the checks
// reduce_rank_order makes, then one launch (reduce_cuda.cu).
#include "ops/cuda/reduce_cuda.hpp"

#include "core/error.hpp"
#include "ops/cuda/cuda_kernels.hpp"

namespace zl {

void reduce_rank_order_cuda(std::span<const void* const> inputs, void* out, std::size_t count,
                            DType dtype, ReduceOp op, cudaStream_t stream) {
  ZL_CHECK(!inputs.empty(), "reduce over zero ranks");
  ZL_CHECK(inputs.size() <= static_cast<std::size_t>(kReduceMaxRanks),
           "a device reduction over {} ranks exceeds the {} one launch takes: reduce in groups",
           inputs.size(), kReduceMaxRanks);
  ZL_CHECK(dtype != DType::I64 && dtype != DType::I8,
           "reductions over {} are not supported: reduce fp32, bf16, fp16 or fp64",
           dtype_name(dtype));
  cuda::reduce_launch(inputs.data(), static_cast<int>(inputs.size()), out,
                      static_cast<std::int64_t>(count), dtype, op, stream);
}

}  // namespace zl
