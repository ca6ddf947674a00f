// cuda_kernels.cu — the CUDA Device's kernels besides the GEMMs and attention: bias and bias
// gradient, GELU (erf, and GPT-2's tanh form), cross-entropy, LayerNorm. Bias, the erf GELU and
// LayerNorm mirror their CPU twins (ops/cpu/*.cpp): where the CPU sums in double, so does the
// kernel, and their elementwise results are computed in double and rounded once; what differs
// is only the order of block-wide sums (a tree, not a loop), and sums that must match the CPU's
// order keep it: bias and LayerNorm weight and bias gradients in ops/column_sums.hpp's chunks (a
// block per chunk of rows and group of columns, then the chunks in order). The tanh GELU and the
// cross-entropy, the step's largest elementwise and row work, compute in fp32 (within the
// tolerances tests/gpu states, as the GEMMs are). A bias or a LayerNorm's weight and bias may be
// read in bf16 (a 16-bit unit's parameters, as they are kept). The embeddings are in
// cuda_embedding.cu.
#include <algorithm>
#include <cstdint>
#include <numbers>

#include "ops/column_sums.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_elements.cuh"
#include "ops/cuda/cuda_kernels.hpp"
#include "ops/cuda/cuda_reduce_block.cuh"
#include "ops/cuda/cuda_vectors.cuh"
#include "ops/gelu_tanh.hpp"

namespace zl::cuda {

namespace {

constexpr int kThreads = 256;
// The CPU kernels' constants, spelled the same way so they round to the same doubles.
constexpr double kLayerNormEps = 1e-5;
constexpr double kInvSqrt2 = 1.0 / std::numbers::sqrt2;
constexpr double kInvSqrt2Pi = std::numbers::inv_sqrtpi / std::numbers::sqrt2;

// x = kWidth elements of `row` from column `first` (a vector's, or one).
template <int kWidth, class T>
__device__ void load_columns(const T* row, std::int64_t first, float (&x)[kWidth]) {
  if constexpr (kWidth == kVector) {
    load8<kDtypeOf<T>>(row, first / kVector, x);
  } else {
    x[0] = get(row + first);
  }
}

// kWidth elements of `row` from column `first` = x, rounded into T.
template <int kWidth, class T>
__device__ void store_columns(T* row, std::int64_t first, const float (&x)[kWidth]) {
  if constexpr (kWidth == kVector) {
    store8<kDtypeOf<T>>(row, first / kVector, x);
  } else {
    put(row + first, x[0]);
  }
}

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

// Column sums keep the CPU's order (ops/column_sums.hpp), so their bits are the CPU's: a block
// takes one chunk of kChunkRows rows of kChunkThreads columns, each thread one column, adding its
// rows in order into the chunk's partial (a warp reads 32 neighbouring columns of a row at once);
// the last of a column group's blocks to finish then adds each column's partials in chunk order.
constexpr int kChunkRows = 256;
static_assert(kChunkRows == kColumnSumChunkRows, "a block's rows are one chunk of a column sum");
constexpr int kChunkThreads = kColumnSumGroupColumns;

// Rows a thread reads before it adds them: loads in flight, the adds still in row order.
constexpr int kBatchRows = 16;

// out[c] = out[c] + (the chunks' partials of column c added in chunk order from zero), in T,
// rounded to float once: the second step of every column sum.
template <class T>
__device__ void add_chunk_sums(const T* partials, std::int64_t chunks, float* out, std::int64_t c,
                               std::int64_t cols) {
  T total = 0;
  for (std::int64_t k = 0; k < chunks; ++k) total += __ldcg(partials + k * cols + c);
  out[c] = static_cast<float>(out[c] + total);
}

// Whether this block is the last of its column group's gridDim.y chunk blocks to finish: each
// block's partials are made visible to the GPU before it counts itself (the last resets the
// count for the next launch). Every thread of the block must call it.
__device__ bool last_chunk_block(unsigned* counters) {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    last = atomicAdd(counters + blockIdx.x, 1u) == gridDim.y - 1;
    if (last) counters[blockIdx.x] = 0;
  }
  __syncthreads();
  return last;
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

// ---- cross-entropy: one block per row of logits [rows, padded_classes], of which the first
// `classes` columns are classes and the rest padding (zero gradient) ----
//
// In fp32, in two passes over the row (the CPU's kernel takes three, in double): each thread keeps
// a running max and a sum of exp(logit - max) rescaled whenever its max rises, the block combines
// the threads' pairs in a fixed tree, and the second pass writes each gradient over the element
// it read. The row's loss is log(sum) - (label logit - max) in double. Vector rows (kWidth 8: the
// row 16-byte aligned) read and write 8 elements a thread at once.

// A thread's (max, sum of exp(x - max)) after it also saw (other_max, other_sum). A side that saw
// nothing (max -infinity) adds nothing; +infinity or NaN logits make the sum NaN, as on the CPU.
__device__ inline void merge_softmax(float& max, float& sum, float other_max, float other_sum) {
  const float top = fmaxf(max, other_max);
  const float mine = max == -INFINITY ? 0.0f : sum * expf(max - top);
  const float theirs = other_max == -INFINITY ? 0.0f : other_sum * expf(other_max - top);
  max = top;
  sum = mine + theirs;
}

// The block's (max, sum) from each thread's, in every thread: the warps' xor trees, then each warp
// the same tree over the warps' pairs (so every warp holds the same bits).
__device__ void block_softmax(float& max, float& sum, float* shared_max, float* shared_sum) {
  for (int offset = 16; offset > 0; offset /= 2) {
    merge_softmax(max, sum, __shfl_xor_sync(0xFFFFFFFFu, max, offset),
                  __shfl_xor_sync(0xFFFFFFFFu, sum, offset));
  }
  const int lane = threadIdx.x % kWarpThreads, warp = threadIdx.x / kWarpThreads;
  if (lane == 0) {
    shared_max[warp] = max;
    shared_sum[warp] = sum;
  }
  __syncthreads();
  const int warps = blockDim.x / kWarpThreads;
  max = lane < warps ? shared_max[lane] : -INFINITY;
  sum = lane < warps ? shared_sum[lane] : 0.0f;
  for (int offset = 16; offset > 0; offset /= 2) {
    merge_softmax(max, sum, __shfl_xor_sync(0xFFFFFFFFu, max, offset),
                  __shfl_xor_sync(0xFFFFFFFFu, sum, offset));
  }
}

// dlogits are multiplied by `scale` (one float multiply, exact at 1) and written in Out's dtype.
template <int kWidth, class In, class Out>
__global__ void cross_entropy_kernel(const In* logits, const std::int64_t* labels, Out* dlogits,
                                     double* row_losses, unsigned long long* bad_index,
                                     std::int64_t classes, std::int64_t padded_classes,
                                     std::int64_t mean_rows, float scale) {
  __shared__ float shared_max[32], shared_sum[32];
  const std::int64_t r = blockIdx.x;
  const std::int64_t label = labels[r];
  if (label < 0 || label >= classes) {  // the whole block leaves together
    if (threadIdx.x == 0) atomicMin(bad_index, static_cast<unsigned long long>(r));
    return;
  }
  const In* row = logits + r * padded_classes;
  Out* drow = dlogits + r * padded_classes;
  // Read before the block's barrier: in place, another thread writes drow[label] after it.
  const float label_logit = get(row + label);
  const std::int64_t groups = (classes + kWidth - 1) / kWidth;  // the last may reach padding
  float max = -INFINITY, sum = 0.0f;
  for (std::int64_t g = threadIdx.x; g < groups; g += blockDim.x) {
    float x[kWidth];
    load_columns<kWidth>(row, g * kWidth, x);
    float top = max;
#pragma unroll
    for (int i = 0; i < kWidth; ++i)
      if (g * kWidth + i < classes) top = fmaxf(top, x[i]);
    if (top > max) {
      sum = max == -INFINITY ? 0.0f : sum * expf(max - top);
      max = top;
    }
#pragma unroll
    for (int i = 0; i < kWidth; ++i)
      if (g * kWidth + i < classes) sum += expf(x[i] - max);
  }
  block_softmax(max, sum, shared_max, shared_sum);
  if (threadIdx.x == 0) {
    row_losses[r] = log(static_cast<double>(sum)) -
                    (static_cast<double>(label_logit) - static_cast<double>(max));
  }
  const auto rows_f = static_cast<float>(mean_rows);
  const std::int64_t padded_groups = padded_classes / kWidth;
  for (std::int64_t g = threadIdx.x; g < padded_groups; g += blockDim.x) {
    float x[kWidth];
    if (g < groups) load_columns<kWidth>(row, g * kWidth, x);
#pragma unroll
    for (int i = 0; i < kWidth; ++i) {
      const std::int64_t c = g * kWidth + i;
      const float target = c == label ? 1.0f : 0.0f;
      x[i] = c < classes ? (expf(x[i] - max) / sum - target) / rows_f * scale : 0.0f * scale;
    }
    store_columns<kWidth>(drow, g * kWidth, x);
  }
}

// One block: the row losses into shared memory, then thread 0 adds them in row order, as the CPU
// sums them, and adds the total to loss_sum once. Rows beyond a block's share go in later rounds.
constexpr int kLossThreads = 512;
__global__ void add_row_losses_kernel(const double* row_losses, std::int64_t rows,
                                      double* loss_sum) {
  __shared__ double staged[kLossThreads];
  double sum = 0.0;
  for (std::int64_t first = 0; first < rows; first += kLossThreads) {
    const std::int64_t count = min(static_cast<std::int64_t>(kLossThreads), rows - first);
    if (threadIdx.x < count) staged[threadIdx.x] = row_losses[first + threadIdx.x];
    __syncthreads();
    if (threadIdx.x == 0) {
      for (std::int64_t i = 0; i < count; ++i) sum += staged[i];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) loss_sum[0] = loss_sum[0] + sum;
}

// The micro-batch's mean loss, rounded to float, added to the step's: the host's operations.
__global__ void add_mean_loss_kernel(const double* loss_sum, double rows, float* total) {
  total[0] = __fadd_rn(total[0], __double2float_rn(__ddiv_rn(loss_sum[0], rows)));
}

// ---- LayerNorm over rows of x [rows, C]: a warp per row, kNormRowsPerBlock rows a block ----

constexpr int kNormRowsPerBlock = kRowThreads / kWarpThreads;

template <class Param, class Out>
__global__ void layernorm_forward_kernel(const float* __restrict__ x,
                                         const Param* __restrict__ weight,
                                         const Param* __restrict__ bias, Out* __restrict__ y,
                                         float* mean, float* rstd, std::int64_t rows,
                                         std::int64_t channels) {
  const std::int64_t r =
      static_cast<std::int64_t>(blockIdx.x) * kNormRowsPerBlock + threadIdx.x / kWarpThreads;
  if (r >= rows) return;  // the whole warp leaves together
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const float* in = x + r * channels;
  const auto count = static_cast<double>(channels);
  // Two passes (mean, then squared deviations), as the CPU, in double.
  double local = 0.0;
  for (std::int64_t c = lane; c < channels; c += kWarpThreads) local += in[c];
  const double row_mean = warp_sum(local) / count;
  local = 0.0;
  for (std::int64_t c = lane; c < channels; c += kWarpThreads) {
    const double deviation = in[c] - row_mean;
    local += deviation * deviation;
  }
  const double squares = warp_sum(local);
  // y uses mean and rstd rounded to float, as stored, so backward sees forward's very xhat.
  const auto mean_f = static_cast<float>(row_mean);
  const auto rstd_f = static_cast<float>(1.0 / sqrt(squares / count + kLayerNormEps));
  if (lane == 0) {
    mean[r] = mean_f;
    rstd[r] = rstd_f;
  }
  Out* out = y + r * channels;
  for (std::int64_t c = lane; c < channels; c += kWarpThreads) {
    const double xhat = (static_cast<double>(in[c]) - mean_f) * rstd_f;
    put(out + c, static_cast<float>(xhat * get(weight + c) + get(bias + c)));
  }
}

template <class Param>
__global__ void layernorm_backward_dx_kernel(const float* __restrict__ x,
                                             const Param* __restrict__ weight, const float* mean,
                                             const float* rstd, const float* __restrict__ dy,
                                             float* __restrict__ dx, std::int64_t rows,
                                             std::int64_t channels) {
  const std::int64_t r =
      static_cast<std::int64_t>(blockIdx.x) * kNormRowsPerBlock + threadIdx.x / kWarpThreads;
  if (r >= rows) return;  // the whole warp leaves together
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  const float* in = x + r * channels;
  const float* grad_out = dy + r * channels;
  float* grad_in = dx + r * channels;
  const double row_mean = mean[r];
  const double row_rstd = rstd[r];
  const auto count = static_cast<double>(channels);
  // g = dy * weight; the two row means the formula subtracts.
  double local_g = 0.0, local_g_xhat = 0.0;
  for (std::int64_t c = lane; c < channels; c += kWarpThreads) {
    const double xhat = (in[c] - row_mean) * row_rstd;
    const double g = static_cast<double>(grad_out[c]) * get(weight + c);
    local_g += g;
    local_g_xhat += g * xhat;
  }
  const double g_mean = warp_sum(local_g) / count;
  const double g_xhat_mean = warp_sum(local_g_xhat) / count;
  for (std::int64_t c = lane; c < channels; c += kWarpThreads) {
    const double xhat = (in[c] - row_mean) * row_rstd;
    const double g = static_cast<double>(grad_out[c]) * get(weight + c);
    grad_in[c] = static_cast<float>(grad_in[c] + (g - g_mean - xhat * g_xhat_mean) * row_rstd);
  }
}

// The chunk partials of dweight and dbias [C] (ops/column_sums.hpp's order, in double, as the
// CPU sums them): block (column group, chunk) as column_sums_kernel, into partials[chunk * C + c]
// and partials[(chunks + chunk) * C + c], which the group's last block adds into dweight and
// dbias.
__global__ void layernorm_backward_params_kernel(
    const float* __restrict__ x, const float* __restrict__ mean, const float* __restrict__ rstd,
    const float* __restrict__ dy, double* __restrict__ partials, float* dweight, float* dbias,
    unsigned* counters, std::int64_t rows, std::int64_t channels) {
  __shared__ float chunk_mean[kChunkRows], chunk_rstd[kChunkRows];
  const std::int64_t first_row = static_cast<std::int64_t>(blockIdx.y) * kChunkRows;
  const int count = static_cast<int>(min(static_cast<std::int64_t>(kChunkRows), rows - first_row));
  for (int i = static_cast<int>(threadIdx.x); i < count; i += static_cast<int>(blockDim.x)) {
    chunk_mean[i] = mean[first_row + i];
    chunk_rstd[i] = rstd[first_row + i];
  }
  __syncthreads();
  const std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const std::int64_t chunks = gridDim.y;
  if (c < channels) {
    const float* x_column = x + first_row * channels + c;
    const float* dy_column = dy + first_row * channels + c;
    double dweight_sum = 0.0, dbias_sum = 0.0;
    for (int i0 = 0; i0 < count; i0 += kBatchRows) {
      float xs[kBatchRows], grads[kBatchRows];
#pragma unroll
      for (int j = 0; j < kBatchRows; ++j) {
        const bool inside = i0 + j < count;
        xs[j] = inside ? x_column[(i0 + j) * channels] : 0.0f;
        grads[j] = inside ? dy_column[(i0 + j) * channels] : 0.0f;
      }
#pragma unroll
      for (int j = 0; j < kBatchRows; ++j) {
        if (i0 + j >= count) continue;
        const double xhat = (xs[j] - static_cast<double>(chunk_mean[i0 + j])) * chunk_rstd[i0 + j];
        dweight_sum += grads[j] * xhat;
        dbias_sum += grads[j];
      }
    }
    partials[blockIdx.y * channels + c] = dweight_sum;
    partials[(chunks + blockIdx.y) * channels + c] = dbias_sum;
  }
  if (last_chunk_block(counters) && c < channels) {
    add_chunk_sums(partials, chunks, dweight, c, channels);
    add_chunk_sums(partials + chunks * channels, chunks, dbias, c, channels);
  }
}

template <class Param, class Out>
void launch_layernorm_forward(const float* x, const Param* weight, const Param* bias, Out* y,
                              float* mean, float* rstd, std::int64_t rows, std::int64_t channels,
                              cudaStream_t stream) {
  if (rows == 0) return;
  layernorm_forward_kernel<<<blocks_covering(rows, kNormRowsPerBlock), kRowThreads, 0, stream>>>(
      x, weight, bias, y, mean, rstd, rows, channels);
  cuda_check_launch("layernorm_forward");
}

template <class Param>
void launch_layernorm_backward(const float* x, const Param* weight, const float* mean,
                               const float* rstd, const float* dy, float* dx, float* dweight,
                               float* dbias, double* partials, unsigned* counters,
                               std::int64_t rows, std::int64_t channels, cudaStream_t stream) {
  if (rows == 0 || channels == 0) return;
  layernorm_backward_dx_kernel<<<blocks_covering(rows, kNormRowsPerBlock), kRowThreads, 0,
                                 stream>>>(x, weight, mean, rstd, dy, dx, rows, channels);
  cuda_check_launch("layernorm_backward (dx)");
  const std::int64_t chunks = column_sum_chunks(rows);
  layernorm_backward_params_kernel<<<dim3(static_cast<unsigned>(column_sum_groups(channels)),
                                          static_cast<unsigned>(chunks)),
                                     kChunkThreads, 0, stream>>>(
      x, mean, rstd, dy, partials, dweight, dbias, counters, rows, channels);
  cuda_check_launch("layernorm_backward (dweight, dbias)");
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

// One block of kRowThreads per row; 8 columns a thread at once where every row is 16-byte aligned.
template <class In, class Out>
void launch_cross_entropy(const In* logits, const std::int64_t* labels, Out* dlogits,
                          double* row_losses, unsigned long long* bad_index, std::int64_t rows,
                          std::int64_t classes, std::int64_t padded_classes, std::int64_t mean_rows,
                          float scale, cudaStream_t stream) {
  const bool vectors = aligned16(logits) && aligned16(dlogits) && padded_classes % kVector == 0;
  const auto blocks = static_cast<unsigned int>(rows);
  if (vectors) {
    cross_entropy_kernel<kVector><<<blocks, kRowThreads, 0, stream>>>(
        logits, labels, dlogits, row_losses, bad_index, classes, padded_classes, mean_rows, scale);
  } else {
    cross_entropy_kernel<1><<<blocks, kRowThreads, 0, stream>>>(
        logits, labels, dlogits, row_losses, bad_index, classes, padded_classes, mean_rows, scale);
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

void cross_entropy(const float* logits, const std::int64_t* labels, float* dlogits,
                   double* row_losses, unsigned long long* bad_index, std::int64_t rows,
                   std::int64_t classes, std::int64_t padded_classes, std::int64_t mean_rows,
                   cudaStream_t stream) {
  launch_cross_entropy(logits, labels, dlogits, row_losses, bad_index, rows, classes,
                       padded_classes, mean_rows, 1.0f, stream);
  cuda_check_launch("cross_entropy");
}

template <class H>
void cross_entropy(const H* logits, const std::int64_t* labels, H* dlogits, double* row_losses,
                   unsigned long long* bad_index, std::int64_t rows, std::int64_t classes,
                   std::int64_t padded_classes, std::int64_t mean_rows, float scale,
                   cudaStream_t stream) {
  launch_cross_entropy(logits, labels, dlogits, row_losses, bad_index, rows, classes,
                       padded_classes, mean_rows, scale, stream);
  cuda_check_launch("cross_entropy (16-bit)");
}

void add_mean_loss(const double* loss_sum, std::int64_t rows, float* total, cudaStream_t stream) {
  add_mean_loss_kernel<<<1, 1, 0, stream>>>(loss_sum, static_cast<double>(rows), total);
  cuda_check_launch("add_mean_loss");
}

void add_row_losses(const double* row_losses, std::int64_t rows, double* loss_sum,
                    cudaStream_t stream) {
  add_row_losses_kernel<<<1, kLossThreads, 0, stream>>>(row_losses, rows, loss_sum);
  cuda_check_launch("cross_entropy (loss sum)");
}

void layernorm_forward(const float* x, const float* weight, const float* bias, float* y,
                       float* mean, float* rstd, std::int64_t rows, std::int64_t channels,
                       cudaStream_t stream) {
  launch_layernorm_forward(x, weight, bias, y, mean, rstd, rows, channels, stream);
}

template <class H>
void layernorm_forward(const float* x, const float* weight, const float* bias, H* y, float* mean,
                       float* rstd, std::int64_t rows, std::int64_t channels, cudaStream_t stream) {
  launch_layernorm_forward(x, weight, bias, y, mean, rstd, rows, channels, stream);
}

template <class H>
void layernorm_forward(const float* x, const H* weight, const H* bias, float* y, float* mean,
                       float* rstd, std::int64_t rows, std::int64_t channels, cudaStream_t stream) {
  launch_layernorm_forward(x, weight, bias, y, mean, rstd, rows, channels, stream);
}

template <class H>
void layernorm_forward(const float* x, const H* weight, const H* bias, H* y, float* mean,
                       float* rstd, std::int64_t rows, std::int64_t channels, cudaStream_t stream) {
  launch_layernorm_forward(x, weight, bias, y, mean, rstd, rows, channels, stream);
}

void layernorm_backward(const float* x, const float* weight, const float* mean, const float* rstd,
                        const float* dy, float* dx, float* dweight, float* dbias, double* partials,
                        unsigned* counters, std::int64_t rows, std::int64_t channels,
                        cudaStream_t stream) {
  launch_layernorm_backward(x, weight, mean, rstd, dy, dx, dweight, dbias, partials, counters, rows,
                            channels, stream);
}

template <class H>
void layernorm_backward(const float* x, const H* weight, const float* mean, const float* rstd,
                        const float* dy, float* dx, float* dweight, float* dbias, double* partials,
                        unsigned* counters, std::int64_t rows, std::int64_t channels,
                        cudaStream_t stream) {
  launch_layernorm_backward(x, weight, mean, rstd, dy, dx, dweight, dbias, partials, counters, rows,
                            channels, stream);
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
  template void gelu_tanh_backward(const H*, const float*, float*, std::int64_t, cudaStream_t); \
  template void cross_entropy(const H*, const std::int64_t*, H*, double*, unsigned long long*,  \
                              std::int64_t, std::int64_t, std::int64_t, std::int64_t, float,    \
                              cudaStream_t);                                                    \
  template void layernorm_forward(const float*, const float*, const float*, H*, float*, float*, \
                                  std::int64_t, std::int64_t, cudaStream_t);                    \
  template void layernorm_forward(const float*, const H*, const H*, float*, float*, float*,     \
                                  std::int64_t, std::int64_t, cudaStream_t);                    \
  template void layernorm_forward(const float*, const H*, const H*, H*, float*, float*,         \
                                  std::int64_t, std::int64_t, cudaStream_t);                    \
  template void layernorm_backward(const float*, const H*, const float*, const float*,          \
                                   const float*, float*, float*, float*, double*, unsigned*,    \
                                   std::int64_t, std::int64_t, cudaStream_t);
ZL_SIXTEEN_BIT_LAUNCHERS(std::uint16_t)
ZL_SIXTEEN_BIT_LAUNCHERS(Fp16)
#undef ZL_SIXTEEN_BIT_LAUNCHERS

}  // namespace zl::cuda
