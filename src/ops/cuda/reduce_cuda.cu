// reduce_cuda.cu — the rank-order reduction kernel: one thread per element walks the ranks in
// order, with comm/reduce.cpp's combine() and load/store conversions, operation for operation.
#include <cmath>
#include <cstdint>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_dtype.cuh"
#include "ops/cuda/cuda_kernels.hpp"
#include "ops/cuda/cuda_reduce_block.cuh"
#include "ops/cuda/reduce_cuda.hpp"

namespace zl::cuda {

namespace {

constexpr int kThreads = 256;

struct RankInputs {
  const void* data[kReduceMaxRanks];
};

__device__ float add_rn(float a, float b) {
  return __fadd_rn(a, b);
}
__device__ double add_rn(double a, double b) {
  return __dadd_rn(a, b);
}
__device__ float div_rn(float a, float b) {
  return __fdiv_rn(a, b);
}
__device__ double div_rn(double a, double b) {
  return __ddiv_rn(a, b);
}

// reduce.cpp's combine(): Sum and Avg add; Max keeps the first NaN it meets, else the larger.
template <class Acc>
__device__ Acc combine(Acc acc, Acc value, ReduceOp op) {
  if (op != ReduceOp::Max) return add_rn(acc, value);
  if (isnan(acc) || isnan(value)) return isnan(acc) ? acc : value;
  return value > acc ? value : acc;
}

struct LoadF32 {
  __device__ float operator()(float x) const { return x; }
};
struct LoadF64 {
  __device__ double operator()(double x) const { return x; }
};
struct LoadBf16 {
  __device__ float operator()(std::uint16_t x) const { return from_bf16(x); }
};
struct LoadF16 {
  __device__ float operator()(std::uint16_t x) const { return from_f16(x); }
};
struct StoreSame {
  template <class T>
  __device__ T operator()(T x) const {
    return x;
  }
};
struct StoreBf16 {
  __device__ std::uint16_t operator()(float x) const { return to_bf16(x); }
};
struct StoreF16 {
  __device__ std::uint16_t operator()(float x) const { return to_f16(x); }
};

template <class T, class Acc, class Load, class Store>
__global__ void reduce_kernel(RankInputs inputs, int world, T* out, std::int64_t count,
                              ReduceOp op) {
  const Load load;
  const Store store;
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    Acc acc = load(static_cast<const T*>(inputs.data[0])[i]);
    for (int r = 1; r < world; ++r) {
      acc = combine(acc, load(static_cast<const T*>(inputs.data[r])[i]), op);
    }
    if (op == ReduceOp::Avg) acc = div_rn(acc, static_cast<Acc>(world));
    out[i] = store(acc);
  }
}

template <class T, class Acc, class Load, class Store>
void launch(const RankInputs& inputs, int world, void* out, std::int64_t count, ReduceOp op,
            cudaStream_t stream) {
  reduce_kernel<T, Acc, Load, Store><<<grid_for(count, kThreads), kThreads, 0, stream>>>(
      inputs, world, static_cast<T*>(out), count, op);
  cuda_check_launch("reduce_rank_order_cuda");
}

}  // namespace

void reduce_launch(const void* const* inputs, int world, void* out, std::int64_t count, DType dtype,
                   ReduceOp op, cudaStream_t stream) {
  if (count == 0) return;
  RankInputs ranks{};
  for (int r = 0; r < world; ++r) ranks.data[r] = inputs[r];
  switch (dtype) {
    case DType::F32:
      return launch<float, float, LoadF32, StoreSame>(ranks, world, out, count, op, stream);
    case DType::F64:
      return launch<double, double, LoadF64, StoreSame>(ranks, world, out, count, op, stream);
    case DType::BF16:
      return launch<std::uint16_t, float, LoadBf16, StoreBf16>(ranks, world, out, count, op,
                                                               stream);
    case DType::F16:
      return launch<std::uint16_t, float, LoadF16, StoreF16>(ranks, world, out, count, op, stream);
    case DType::I64:
    case DType::I8:
      break;
  }
}

}  // namespace zl::cuda
