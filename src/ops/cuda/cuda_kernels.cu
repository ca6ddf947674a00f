// cuda_kernels.cu — the CUDA Device's bias and bias gradient and its GELUs (erf, and GPT-2's tanh
// form); LayerNorm is in cuda_layernorm.cu, the cross-entropy in cuda_cross_entropy.cu, the
// embeddings in cuda_embedding.cu. Bias and the erf GELU mirror their CPU twins (ops/cpu/*.cpp):
// their elementwise results are computed in double and rounded once, and the bias gradient keeps
// the CPU's order (ops/column_sums.hpp's chunks: a block per chunk of rows and group of columns,
// then the chunks in order), so its bits are the CPU's. The tanh GELU, the step's largest
// elementwise work, computes in fp32 (within the tolerances tests/gpu states, as the GEMMs are).
// A bias may be read in bf16 or fp16 (a 16-bit unit's parameters, as they are kept).
#include <algorithm>
#include <cstdint>
#include <numbers>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_column_sums.cuh"
#include "ops/cuda/cuda_elements.cuh"
#include "ops/cuda/cuda_kernels.hpp"
#include "ops/cuda/cuda_reduce_block.cuh"
#include "ops/cuda/cuda_vectors.cuh"
#include "ops/gelu_tanh.hpp"

namespace zl::cuda {

namespace {

constexpr int kThreads = 256;
// The CPU kernels' constants, spelled the same way so they round to the same doubles.
constexpr double kInvSqrt2 = 1.0 / std::numbers::sqrt2;
constexpr double kInvSqrt2Pi = std::numbers::inv_sqrtpi / std::numbers::sqrt2;

// ---- bias ----

// out = y + b (b broadcast over rows; y alone where b is null), each sum rounded into Out (fp32
// in place, or bf16). A thread takes one group of kWidth columns, reads its bias once and walks
// rows blockIdx.y, blockIdx.y + gridDim.y, ...: no index division.
template <int kWidth, class Bias, class Out>
__global__ void add_bias_kernel(const float* y, const Bias* b, Out* out, std::int64_t rows,
                                std::int64_t cols) {
  const std::int64_t first =
      (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) * kWidth;
  if (first >= cols) return;
  float bias[kWidth] = {};
  if (b != nullptr) load_columns<kWidth>(b, first, bias);
  for (std::int64_t r = blockIdx.y; r < rows; r += gridDim.y) {
    float x[kWidth];
    load_columns<kWidth>(y + r * cols, first, x);
    if (b != nullptr) {
#pragma unroll
      for (int i = 0; i < kWidth; ++i) x[i] = x[i] + bias[i];
    }
    store_columns<kWidth>(out + r * cols, first, x);
  }
}

// partials[chunk * cols + c] = the sum of column c over chunk blockIdx.y's rows, in row order (each
// row also rounded to Rounded, bf16 or fp16, into `rounded` where it is not null); the last chunk
// block of a column group then adds the group's partials into out.
template <class Rounded>
__global__ void column_sums_kernel(const float* __restrict__ dy, Rounded* __restrict__ rounded,
                                   float* __restrict__ partials, float* __restrict__ out,
                                   unsigned* counters, std::int64_t rows, std::int64_t cols) {
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t first_row = static_cast<std::int64_t>(blockIdx.y) * kChunkRows;
  const int count = static_cast<int>(min(static_cast<std::int64_t>(kChunkRows), rows - first_row));
  if (c < cols) {
    const float* column = dy + first_row * cols + c;
    Rounded* rounded_column = rounded == nullptr ? nullptr : rounded + first_row * cols + c;
    float sum = 0.0f;
    for (int i0 = 0; i0 < count; i0 += kBatchRows) {
      float values[kBatchRows];
#pragma unroll
      for (int j = 0; j < kBatchRows; ++j)
        values[j] = i0 + j < count ? column[(i0 + j) * cols] : 0.0f;
#pragma unroll
      for (int j = 0; j < kBatchRows; ++j) {
        if (i0 + j >= count) continue;
        sum += values[j];
        if (rounded_column != nullptr) put(rounded_column + (i0 + j) * cols, values[j]);
      }
    }
    partials[blockIdx.y * cols + c] = sum;
  }
  if (last_chunk_block(counters) && c < cols) add_chunk_sums(partials, gridDim.y, out, c, cols);
}

// out[c] = out[c] + 0 for a sum over no rows, as the CPU adds it.
__global__ void add_nothing_kernel(float* out, std::int64_t cols) {
  for (std::int64_t c = global_index(); c < cols; c += global_stride()) out[c] = out[c] + 0.0f;
}

// ---- GELU ----

__global__ void gelu_forward_kernel(const float* x, float* y, std::int64_t elems) {
  for (std::int64_t i = global_index(); i < elems; i += global_stride()) {
    const double v = x[i];
    y[i] = static_cast<float>(0.5 * v * (1.0 + erf(v * kInvSqrt2)));
  }
}

__global__ void gelu_backward_kernel(const float* x, const float* dy, float* dx,
                                     std::int64_t elems) {
  for (std::int64_t i = global_index(); i < elems; i += global_stride()) {
    const double v = x[i];
    const double cdf = 0.5 * (1.0 + erf(v * kInvSqrt2));  // Phi(x)
    const double pdf = kInvSqrt2Pi * exp(-0.5 * v * v);   // phi(x)
    dx[i] = static_cast<float>(static_cast<double>(dy[i]) * (cdf + v * pdf));
  }
}

// GPT-2's tanh GELU in fp32 (the CPU's gelu_tanh.hpp computes in double and rounds once, which
// on this GPU's fp64 units took 4.6 ms of a GPT-2 124M step; fp32 is within a few float ulps of
// it, as PyTorch's is): x sigmoid(2u) and dy (s + 2 x s (1 - s) du/dx), u = sqrt(2/pi) (x +
// 0.044715 x^3), both sigmoids from one exp(-2|u|).
struct GeluTanhF32 {
  float s;      // sigmoid(2u)
  float s_neg;  // 1 - s
};
__device__ inline GeluTanhF32 gelu_tanh_sigmoids(float x) {
  constexpr auto kCoeff = static_cast<float>(gelu_tanh::kCoeff);
  constexpr auto kSqrt2OverPi = static_cast<float>(gelu_tanh::kSqrt2OverPi);
  const float u = kSqrt2OverPi * (x + kCoeff * x * x * x);
  const float e = expf(-2.0f * fabsf(u));
  const float big = 1.0f / (1.0f + e);  // sigmoid(2|u|)
  const float small = e * big;          // sigmoid(-2|u|)
  return u >= 0.0f ? GeluTanhF32{big, small} : GeluTanhF32{small, big};
}
__device__ inline float gelu_tanh_forward_f32(float x) {
  return x * gelu_tanh_sigmoids(x).s;
}
__device__ inline float gelu_tanh_backward_f32(float x, float dy) {
  constexpr auto kCoeff = static_cast<float>(gelu_tanh::kCoeff);
  constexpr auto kSqrt2OverPi = static_cast<float>(gelu_tanh::kSqrt2OverPi);
  const GeluTanhF32 g = gelu_tanh_sigmoids(x);
  const float du_dx = kSqrt2OverPi * (1.0f + 3.0f * kCoeff * x * x);
  return dy * (g.s + 2.0f * x * g.s * g.s_neg * du_dx);
}

// kWidth elements a thread (8 where every array is 16-byte aligned), grid-stride.
template <int kWidth, class In, class Out>
__global__ void gelu_tanh_forward_kernel(const In* x, Out* y, std::int64_t groups) {
  for (std::int64_t g = global_index(); g < groups; g += global_stride()) {
    float v[kWidth];
    load_columns<kWidth>(x, g * kWidth, v);
#pragma unroll
    for (int i = 0; i < kWidth; ++i) v[i] = gelu_tanh_forward_f32(v[i]);
    store_columns<kWidth>(y, g * kWidth, v);
  }
}

template <int kWidth, class In>
__global__ void gelu_tanh_backward_kernel(const In* x, const float* dy, float* dx,
                                          std::int64_t groups) {
  for (std::int64_t g = global_index(); g < groups; g += global_stride()) {
    float v[kWidth], grad[kWidth];
    load_columns<kWidth>(x, g * kWidth, v);
    load_columns<kWidth>(dy, g * kWidth, grad);
#pragma unroll
    for (int i = 0; i < kWidth; ++i) grad[i] = gelu_tanh_backward_f32(v[i], grad[i]);
    store_columns<kWidth>(dx, g * kWidth, grad);
  }
}

// The tanh GELU kernels, 8 elements a thread where every array is 16-byte aligned and elems is
// a multiple of 8, one otherwise.
template <class In, class Out>
void launch_gelu_tanh_forward(const In* x, Out* y, std::int64_t elems, cudaStream_t stream) {
  if (elems == 0) return;
  if (aligned16(x) && aligned16(y) && elems % kVector == 0) {
    const std::int64_t groups = elems / kVector;
    gelu_tanh_forward_kernel<kVector>
        <<<grid_for(groups, kThreads), kThreads, 0, stream>>>(x, y, groups);
  } else {
    gelu_tanh_forward_kernel<1><<<grid_for(elems, kThreads), kThreads, 0, stream>>>(x, y, elems);
  }
}

template <class In>
void launch_gelu_tanh_backward(const In* x, const float* dy, float* dx, std::int64_t elems,
                               cudaStream_t stream) {
  if (elems == 0) return;
  if (aligned16(x) && aligned16(dy) && aligned16(dx) && elems % kVector == 0) {
    const std::int64_t groups = elems / kVector;
    gelu_tanh_backward_kernel<kVector>
        <<<grid_for(groups, kThreads), kThreads, 0, stream>>>(x, dy, dx, groups);
  } else {
    gelu_tanh_backward_kernel<1>
        <<<grid_for(elems, kThreads), kThreads, 0, stream>>>(x, dy, dx, elems);
  }
}

// add_bias_kernel over [rows, cols]: 8 columns a thread where every row is 16-byte aligned, and
// enough row strides to fill the GPU (about 4096 blocks).
template <class Bias, class Out>
void launch_add_bias(const float* y, const Bias* b, Out* out, std::int64_t rows, std::int64_t cols,
                     cudaStream_t stream) {
  if (rows * cols == 0) return;
  constexpr int kBiasThreads = 128;
  const bool vectors =
      aligned16(y) && aligned16(out) && (b == nullptr || aligned16(b)) && cols % kVector == 0;
  const std::int64_t groups = vectors ? cols / kVector : cols;
  const unsigned int column_blocks = blocks_covering(groups, kBiasThreads);
  const std::int64_t row_blocks = std::min<std::int64_t>({rows, 65535, 4096 / column_blocks + 1});
  const dim3 grid(column_blocks, static_cast<unsigned int>(row_blocks));
  if (vectors) {
    add_bias_kernel<kVector><<<grid, kBiasThreads, 0, stream>>>(y, b, out, rows, cols);
  } else {
    add_bias_kernel<1><<<grid, kBiasThreads, 0, stream>>>(y, b, out, rows, cols);
  }
}

}  // namespace

void add_bias_rows(float* y, const float* b, std::int64_t rows, std::int64_t cols,
                   cudaStream_t stream) {
  launch_add_bias(y, b, y, rows, cols, stream);
  cuda_check_launch("add_bias_rows");
}

template <class H>
void add_bias_rows(float* y, const H* b, std::int64_t rows, std::int64_t cols,
                   cudaStream_t stream) {
  launch_add_bias(y, b, y, rows, cols, stream);
  cuda_check_launch("add_bias_rows (16-bit bias)");
}

template <class H>
void add_bias_round_rows(const float* y, const float* b, H* out, std::int64_t rows,
                         std::int64_t cols, cudaStream_t stream) {
  launch_add_bias(y, b, out, rows, cols, stream);
  cuda_check_launch("add_bias_round_rows");
}

template <class H>
void add_bias_round_rows(const float* y, const H* b, H* out, std::int64_t rows, std::int64_t cols,
                         cudaStream_t stream) {
  launch_add_bias(y, b, out, rows, cols, stream);
  cuda_check_launch("add_bias_round_rows (16-bit bias)");
}

namespace {

template <class Rounded>
void launch_column_sums(const float* dy, float* db, Rounded* rounded, float* partials,
                        unsigned* counters, std::int64_t rows, std::int64_t cols,
                        cudaStream_t stream) {
  if (cols == 0) return;
  const std::int64_t chunks = column_sum_chunks(rows);
  if (chunks == 0) {  // 0 rows: db + 0, as the CPU adds
    add_nothing_kernel<<<grid_for(cols, kThreads), kThreads, 0, stream>>>(db, cols);
    cuda_check_launch("add_column_sums (no rows)");
    return;
  }
  column_sums_kernel<<<dim3(static_cast<unsigned>(column_sum_groups(cols)),
                            static_cast<unsigned>(chunks)),
                       kChunkThreads, 0, stream>>>(dy, rounded, partials, db, counters, rows, cols);
  cuda_check_launch("add_column_sums");
}

}  // namespace

template <class H>
void add_column_sums(const float* dy, float* db, H* rounded, float* partials, unsigned* counters,
                     std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  launch_column_sums(dy, db, rounded, partials, counters, rows, cols, stream);
}

void gelu_forward(const float* x, float* y, std::int64_t elems, cudaStream_t stream) {
  if (elems == 0) return;
  gelu_forward_kernel<<<grid_for(elems, kThreads), kThreads, 0, stream>>>(x, y, elems);
  cuda_check_launch("gelu_forward");
}

void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t elems,
                   cudaStream_t stream) {
  if (elems == 0) return;
  gelu_backward_kernel<<<grid_for(elems, kThreads), kThreads, 0, stream>>>(x, dy, dx, elems);
  cuda_check_launch("gelu_backward");
}

void gelu_tanh_forward(const float* x, float* y, std::int64_t elems, cudaStream_t stream) {
  launch_gelu_tanh_forward(x, y, elems, stream);
  cuda_check_launch("gelu_tanh_forward");
}

void gelu_tanh_backward(const float* x, const float* dy, float* dx, std::int64_t elems,
                        cudaStream_t stream) {
  launch_gelu_tanh_backward(x, dy, dx, elems, stream);
  cuda_check_launch("gelu_tanh_backward");
}

template <class H>
void gelu_tanh_forward(const H* x, H* y, std::int64_t elems, cudaStream_t stream) {
  launch_gelu_tanh_forward(x, y, elems, stream);
  cuda_check_launch("gelu_tanh_forward (16-bit)");
}

template <class H>
void gelu_tanh_backward(const H* x, const float* dy, float* dx, std::int64_t elems,
                        cudaStream_t stream) {
  launch_gelu_tanh_backward(x, dy, dx, elems, stream);
  cuda_check_launch("gelu_tanh_backward (16-bit)");
}

// The 16-bit launchers for both formats: bf16 (std::uint16_t) and fp16 (Fp16).
#define ZL_SIXTEEN_BIT_LAUNCHERS(H)                                                             \
  template void add_bias_rows(float*, const H*, std::int64_t, std::int64_t, cudaStream_t);      \
  template void add_bias_round_rows(const float*, const float*, H*, std::int64_t, std::int64_t, \
                                    cudaStream_t);                                              \
  template void add_bias_round_rows(const float*, const H*, H*, std::int64_t, std::int64_t,     \
                                    cudaStream_t);                                              \
  template void add_column_sums(const float*, float*, H*, float*, unsigned*, std::int64_t,      \
                                std::int64_t, cudaStream_t);                                    \
  template void gelu_tanh_forward(const H*, H*, std::int64_t, cudaStream_t);                    \
  template void gelu_tanh_backward(const H*, const float*, float*, std::int64_t, cudaStream_t);
ZL_SIXTEEN_BIT_LAUNCHERS(std::uint16_t)
ZL_SIXTEEN_BIT_LAUNCHERS(Fp16)
#undef ZL_SIXTEEN_BIT_LAUNCHERS

}  // namespace zl::cuda
