// cuda_step_kernels.cu — the elementwise kernels of a training step (the Device's step work):
// dtype conversions, accumulation, scaling, unscaling and the gradient norm's block sums of
// squares and their tree sums. Each is its host twin's arithmetic (ops/cpu/cpu_step_ops.cpp), one
// IEEE-rounded operation per element (no contraction), so the GPU gives the same bits as the CPU.
// Conversions and rounding move 8 elements a thread in 16-byte loads and stores where the arrays
// are 16-byte aligned (a scalar kernel takes the rest), as they are the step's most frequent
// kernels.
#include <cstdint>
#include <vector>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_dtype.cuh"
#include "ops/cuda/cuda_kernels.hpp"
#include "ops/cuda/cuda_reduce_block.cuh"
#include "ops/cuda/cuda_tree_sum.cuh"
#include "ops/cuda/cuda_vectors.cuh"
#include "optim/grad_norm.hpp"

namespace zl::cuda {

namespace {

constexpr int kThreads = 256;

__device__ std::int64_t first_index() {
  return static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}
__device__ std::int64_t stride() {
  return static_cast<std::int64_t>(gridDim.x) * blockDim.x;
}

// Element i of a training-dtype array widened to fp32 (exact), as the host's load().
__device__ float load_f32(const void* data, DType dtype, std::int64_t i) {
  switch (dtype) {
    case DType::BF16:
      return from_bf16(static_cast<const std::uint16_t*>(data)[i]);
    case DType::F16:
      return from_f16(static_cast<const std::uint16_t*>(data)[i]);
    default:
      return static_cast<const float*>(data)[i];
  }
}

// Element i of a training-dtype array set to `value` rounded to nearest even, as the host's
// store().
__device__ void store_f32(void* data, DType dtype, std::int64_t i, float value) {
  switch (dtype) {
    case DType::BF16:
      static_cast<std::uint16_t*>(data)[i] = to_bf16(value);
      return;
    case DType::F16:
      static_cast<std::uint16_t*>(data)[i] = to_f16(value);
      return;
    default:
      static_cast<float*>(data)[i] = value;
  }
}

// ---- 8 elements at a time (cuda_vectors.cuh), the dtypes fixed at compile time -------------

template <DType kIn, DType kOut>
__global__ void convert_vectors_kernel(const void* in, void* out, std::int64_t vectors) {
  for (std::int64_t v = first_index(); v < vectors; v += stride()) {
    float x[kVector];
    load8<kIn>(in, v, x);
    store8<kOut>(out, v, x);
  }
}

template <DType kDtype>
__global__ void add_vectors_kernel(void* acc, const void* addend, std::int64_t vectors) {
  for (std::int64_t v = first_index(); v < vectors; v += stride()) {
    float x[kVector], y[kVector];
    load8<kDtype>(acc, v, x);
    load8<kDtype>(addend, v, y);
#pragma unroll
    for (int i = 0; i < kVector; ++i) x[i] = __fadd_rn(x[i], y[i]);
    store8<kDtype>(acc, v, x);
  }
}

template <DType kDtype>
__global__ void round_to_vectors_kernel(float* x, std::int64_t vectors) {
  for (std::int64_t v = first_index(); v < vectors; v += stride()) {
    float values[kVector];
    load8<DType::F32>(x, v, values);
#pragma unroll
    for (int i = 0; i < kVector; ++i) {
      values[i] = widen<kDtype>(static_cast<std::uint16_t>(narrow<kDtype>(values[i])));
    }
    store8<DType::F32>(x, v, values);
  }
}

// f.template operator()<kDtype>() for a training dtype (fp32, bf16, fp16).
template <class F>
void with_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::BF16: return f.template operator()<DType::BF16>();
    case DType::F16: return f.template operator()<DType::F16>();
    default: return f.template operator()<DType::F32>();
  }
}

// ---- one element at a time, the dtypes read at run time ---------------------------------------

// The dtypes are the same for every thread, so the switches do not diverge.
__global__ void convert_kernel(const void* in, DType in_dtype, void* out, DType out_dtype,
                               std::int64_t elems) {
  for (std::int64_t i = first_index(); i < elems; i += stride()) {
    store_f32(out, out_dtype, i, load_f32(in, in_dtype, i));
  }
}

__global__ void add_kernel(void* acc, const void* addend, DType dtype, std::int64_t elems) {
  for (std::int64_t i = first_index(); i < elems; i += stride()) {
    store_f32(acc, dtype, i, __fadd_rn(load_f32(acc, dtype, i), load_f32(addend, dtype, i)));
  }
}

__global__ void scale_kernel(float* x, float factor, std::int64_t elems) {
  for (std::int64_t i = first_index(); i < elems; i += stride()) x[i] = __fmul_rn(x[i], factor);
}

__global__ void divide_kernel(float* x, float divisor, std::int64_t elems) {
  for (std::int64_t i = first_index(); i < elems; i += stride()) x[i] = __fdiv_rn(x[i], divisor);
}

__global__ void round_to_kernel(float* x, DType dtype, std::int64_t elems) {
  for (std::int64_t i = first_index(); i < elems; i += stride()) {
    std::uint16_t half = 0;
    store_f32(&half, dtype, 0, x[i]);
    x[i] = load_f32(&half, dtype, 0);
  }
}

// optim/grad_norm.cpp's append_block_sumsq, one block of the gradient per thread, on the
// gradient read as Device::block_sumsq_unscaled reads it (widened, divided unless by 1).
template <class G>
__global__ void block_sumsq_kernel(const G* grads, float divisor, double* partials,
                                   std::int64_t blocks, std::int64_t block_elems) {
  for (std::int64_t b = first_index(); b < blocks; b += stride()) {
    double sum = 0.0;
    for (std::int64_t i = b * block_elems; i < (b + 1) * block_elems; ++i) {
      float read = get(grads + i);
      if (divisor != 1.0f) read = __fdiv_rn(read, divisor);
      const double g = read;
      sum = __dadd_rn(sum, __dmul_rn(g, g));
    }
    partials[b] = sum;
  }
}

}  // namespace

void convert(const void* in, DType in_dtype, void* out, DType out_dtype, std::int64_t elems,
             cudaStream_t stream) {
  if (elems == 0) return;
  const std::int64_t vectors = aligned16(in) && aligned16(out) ? elems / kVector : 0;
  if (vectors > 0) {
    with_dtype(in_dtype, [&]<DType kIn>() {
      with_dtype(out_dtype, [&]<DType kOut>() {
        convert_vectors_kernel<kIn, kOut>
            <<<grid_for(vectors, kThreads), kThreads, 0, stream>>>(in, out, vectors);
      });
    });
    cuda_check_launch("convert");
  }
  const std::int64_t done = vectors * kVector;
  if (done == elems) return;
  const auto done_elems = static_cast<std::size_t>(done);
  const auto* in_rest = static_cast<const char*>(in) + done_elems * dtype_bytes(in_dtype);
  auto* out_rest = static_cast<char*>(out) + done_elems * dtype_bytes(out_dtype);
  convert_kernel<<<grid_for(elems - done, kThreads), kThreads, 0, stream>>>(
      in_rest, in_dtype, out_rest, out_dtype, elems - done);
  cuda_check_launch("convert");
}

void add(void* acc, const void* addend, DType dtype, std::int64_t elems, cudaStream_t stream) {
  if (elems == 0) return;
  const std::int64_t vectors = aligned16(acc) && aligned16(addend) ? elems / kVector : 0;
  if (vectors > 0) {
    with_dtype(dtype, [&]<DType kDtype>() {
      add_vectors_kernel<kDtype>
          <<<grid_for(vectors, kThreads), kThreads, 0, stream>>>(acc, addend, vectors);
    });
    cuda_check_launch("add");
  }
  const std::int64_t done = vectors * kVector;
  if (done == elems) return;
  const auto done_bytes = static_cast<std::size_t>(done) * dtype_bytes(dtype);
  add_kernel<<<grid_for(elems - done, kThreads), kThreads, 0, stream>>>(
      static_cast<char*>(acc) + done_bytes, static_cast<const char*>(addend) + done_bytes, dtype,
      elems - done);
  cuda_check_launch("add");
}

void scale(float* x, float factor, std::int64_t elems, cudaStream_t stream) {
  if (elems == 0) return;
  scale_kernel<<<grid_for(elems, kThreads), kThreads, 0, stream>>>(x, factor, elems);
  cuda_check_launch("scale");
}

void divide(float* x, float divisor, std::int64_t elems, cudaStream_t stream) {
  if (elems == 0) return;
  divide_kernel<<<grid_for(elems, kThreads), kThreads, 0, stream>>>(x, divisor, elems);
  cuda_check_launch("divide");
}

void round_to(float* x, DType dtype, std::int64_t elems, cudaStream_t stream) {
  if (elems == 0) return;
  const std::int64_t vectors = aligned16(x) && dtype != DType::F32 ? elems / kVector : 0;
  if (vectors > 0) {
    const auto launch = [&]<DType kDtype>() {
      round_to_vectors_kernel<kDtype><<<grid_for(vectors, kThreads), kThreads, 0, stream>>>(
          x, vectors);
    };
    if (dtype == DType::BF16) launch.template operator()<DType::BF16>();
    else launch.template operator()<DType::F16>();
    cuda_check_launch("round_to");
  }
  const std::int64_t done = vectors * kVector;
  if (done == elems) return;
  round_to_kernel<<<grid_for(elems - done, kThreads), kThreads, 0, stream>>>(x + done, dtype,
                                                                             elems - done);
  cuda_check_launch("round_to");
}

void block_sumsq(const float* grads, double* partials, std::int64_t blocks,
                 std::int64_t block_elems, cudaStream_t stream) {
  block_sumsq(grads, DType::F32, 1.0f, partials, blocks, block_elems, stream);
}

void block_sumsq(const void* grads, DType dtype, float divisor, double* partials,
                 std::int64_t blocks, std::int64_t block_elems, cudaStream_t stream) {
  if (blocks == 0) return;
  const auto launch = [&](const auto* typed) {
    block_sumsq_kernel<<<grid_for(blocks, kThreads), kThreads, 0, stream>>>(
        typed, divisor, partials, blocks, block_elems);
  };
  if (dtype == DType::F32) {
    launch(static_cast<const float*>(grads));
  } else {
    for_half(dtype, [&]<class H>() { launch(static_cast<const H*>(grads)); });
  }
  cuda_check_launch("block_sumsq");
}

std::int64_t tree_sum_scratch_elems(std::int64_t leaf_count) {
  // two passes' block sums: each node of a cover (at most kMaxNodes) its leaves / 2^kBlockLevel
  // blocks, rounded up
  return 2 * ((leaf_count >> tree_sum::kBlockLevel) + tree_sum::kMaxNodes);
}

void tree_cover_sums(const double* leaves, std::int64_t leaf_count, std::int64_t first_leaf,
                     double* sums, double* scratch, cudaStream_t stream) {
  const std::vector<TreeNode> cover = tree_cover(first_leaf, leaf_count);
  if (cover.empty()) return;
  tree_sum::Nodes nodes;  // at most two a level of leaves' 63 levels: 126, within kMaxNodes
  nodes.count = static_cast<int>(cover.size());
  for (std::size_t n = 0; n < cover.size(); ++n) {
    nodes.offset[n] = cover[n].first_leaf() - first_leaf;
    nodes.level[n] = cover[n].level;
  }
  tree_sum::cover_sums(
      leaves, nodes, sums, scratch, tree_sum_scratch_elems(leaf_count) / 2,
      [&](const double* in, const tree_sum::Nodes& pass, double* out) {
        const auto blocks = static_cast<unsigned>(pass.first_block[pass.count]);
        tree_sum::block_sums_kernel<<<blocks, tree_sum::kThreads, tree_sum::kSharedBytes, stream>>>(
            in, pass, out);
        cuda_check_launch("tree_cover_sums");
      });
}

}  // namespace zl::cuda
