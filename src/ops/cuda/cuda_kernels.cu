// cuda_kernels.cu — the CUDA Device's kernels besides the GEMMs and attention: bias and bias
// gradient, GELU (erf, and tanh through ops/gelu_tanh.hpp, the CPU's own code), cross-entropy,
// LayerNorm. Each mirrors its CPU twin
// (ops/cpu/*.cpp): where the CPU sums in double, so does the kernel, and elementwise results are
// computed in double and rounded once. What differs is only the order of block-wide sums (a tree,
// not a loop); sums that must match the CPU's order keep it: bias and LayerNorm weight and bias
// gradients in ops/column_sums.hpp's chunks (a block per chunk of rows and tile of columns, then
// the chunks in order). A bias or a LayerNorm's weight and bias may be read in bf16 (a 16-bit
// unit's parameters, as they are kept). The embeddings are in cuda_embedding.cu.
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
// takes one chunk of kTileRows rows of kTileCols columns, loads it into shared memory at once
// (one 32-byte sector per row), and one lane per column adds its rows in order into the chunk's
// partial; a second kernel adds each column's partials in chunk order.
constexpr int kTileCols = 8;
constexpr int kTileRows = 256;
static_assert(kTileRows == kColumnSumChunkRows, "a block's rows are one chunk of a column sum");
constexpr int kTileThreads = 256;
constexpr int kTileRowLanes = kTileThreads / kTileCols;

// Copies rows [first_row, first_row + kTileRows) of columns [first_col, first_col + kTileCols)
// of `in` [rows, cols] into `tile` (0 past the edges); every thread of the block calls it.
__device__ void load_tile(const float* in, std::int64_t rows, std::int64_t cols,
                          std::int64_t first_row, std::int64_t first_col,
                          float (&tile)[kTileRows][kTileCols]) {
  const int col = static_cast<int>(threadIdx.x) % kTileCols;
  const std::int64_t c = first_col + col;
  for (int i = static_cast<int>(threadIdx.x) / kTileCols; i < kTileRows; i += kTileRowLanes) {
    const std::int64_t r = first_row + i;
    tile[i][col] = r < rows && c < cols ? in[r * cols + c] : 0.0f;
  }
}

// partials[chunk * cols + c] = the sum of column c over chunk blockIdx.y's rows, in row order,
// for the columns of tile blockIdx.x.
__global__ void column_chunk_sums_kernel(const float* dy, float* partials, std::int64_t rows,
                                         std::int64_t cols) {
  __shared__ float tile[kTileRows][kTileCols];
  const std::int64_t first_col = static_cast<std::int64_t>(blockIdx.x) * kTileCols;
  const std::int64_t first_row = static_cast<std::int64_t>(blockIdx.y) * kTileRows;
  const auto col = static_cast<int>(threadIdx.x);  // the summing lanes: threads 0 .. kTileCols-1
  load_tile(dy, rows, cols, first_row, first_col, tile);
  __syncthreads();
  if (col < kTileCols && first_col + col < cols) {
    const std::int64_t count = min(static_cast<std::int64_t>(kTileRows), rows - first_row);
    float sum = 0.0f;
    for (std::int64_t i = 0; i < count; ++i) sum += tile[i][col];
    partials[blockIdx.y * cols + first_col + col] = sum;
  }
}

// out[c] = out[c] + (the chunks' partials of column c added in chunk order from zero), in T,
// rounded to float once: the second step of every column sum.
template <class T>
__global__ void add_chunk_sums_kernel(const T* partials, std::int64_t chunks, float* out,
                                      std::int64_t cols) {
  for (std::int64_t c = global_index(); c < cols; c += global_stride()) {
    T total = 0;
    for (std::int64_t k = 0; k < chunks; ++k) total += partials[k * cols + c];
    out[c] = static_cast<float>(out[c] + total);
  }
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

template <class In, class Out>
__global__ void gelu_tanh_forward_kernel(const In* x, Out* y, std::int64_t elems) {
  for (std::int64_t i = global_index(); i < elems; i += global_stride()) {
    put(y + i, gelu_tanh::forward(get(x + i)));
  }
}

template <class In>
__global__ void gelu_tanh_backward_kernel(const In* x, const float* dy, float* dx,
                                          std::int64_t elems) {
  for (std::int64_t i = global_index(); i < elems; i += global_stride()) {
    dx[i] = gelu_tanh::backward(get(x + i), dy[i]);
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

// ---- LayerNorm over rows of x [rows, C] ----

template <class Param, class Out>
__global__ void layernorm_forward_kernel(const float* x, const Param* weight, const Param* bias,
                                         Out* y, float* mean, float* rstd, std::int64_t channels) {
  __shared__ double partials[32];
  const std::int64_t r = blockIdx.x;
  const float* in = x + r * channels;
  const auto count = static_cast<double>(channels);
  // Two passes (mean, then squared deviations), as the CPU, in double.
  double local = 0.0;
  for (std::int64_t c = threadIdx.x; c < channels; c += blockDim.x) local += in[c];
  const double row_mean = block_sum(local, partials) / count;
  local = 0.0;
  for (std::int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
    const double deviation = in[c] - row_mean;
    local += deviation * deviation;
  }
  const double squares = block_sum(local, partials);
  // y uses mean and rstd rounded to float, as stored, so backward sees forward's very xhat.
  const auto mean_f = static_cast<float>(row_mean);
  const auto rstd_f = static_cast<float>(1.0 / sqrt(squares / count + kLayerNormEps));
  if (threadIdx.x == 0) {
    mean[r] = mean_f;
    rstd[r] = rstd_f;
  }
  Out* out = y + r * channels;
  for (std::int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
    const double xhat = (static_cast<double>(in[c]) - mean_f) * rstd_f;
    put(out + c, static_cast<float>(xhat * get(weight + c) + get(bias + c)));
  }
}

template <class Param>
__global__ void layernorm_backward_dx_kernel(const float* x, const Param* weight, const float* mean,
                                             const float* rstd, const float* dy, float* dx,
                                             std::int64_t channels) {
  __shared__ double partials[32];
  const std::int64_t r = blockIdx.x;
  const float* in = x + r * channels;
  const float* grad_out = dy + r * channels;
  float* grad_in = dx + r * channels;
  const double row_mean = mean[r];
  const double row_rstd = rstd[r];
  const auto count = static_cast<double>(channels);
  // g = dy * weight; the two row means the formula subtracts.
  double local_g = 0.0, local_g_xhat = 0.0;
  for (std::int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
    const double xhat = (in[c] - row_mean) * row_rstd;
    const double g = static_cast<double>(grad_out[c]) * get(weight + c);
    local_g += g;
    local_g_xhat += g * xhat;
  }
  const double g_mean = block_sum(local_g, partials) / count;
  const double g_xhat_mean = block_sum(local_g_xhat, partials) / count;
  for (std::int64_t c = threadIdx.x; c < channels; c += blockDim.x) {
    const double xhat = (in[c] - row_mean) * row_rstd;
    const double g = static_cast<double>(grad_out[c]) * get(weight + c);
    grad_in[c] = static_cast<float>(grad_in[c] + (g - g_mean - xhat * g_xhat_mean) * row_rstd);
  }
}

// The chunk partials of dweight and dbias [C] (ops/column_sums.hpp's order, in double, as the
// CPU sums them): block (column tile, chunk) as column_chunk_sums_kernel, into
// partials[chunk * C + c] and partials[(chunks + chunk) * C + c].
__global__ void layernorm_backward_params_kernel(const float* x, const float* mean,
                                                 const float* rstd, const float* dy,
                                                 double* partials, std::int64_t rows,
                                                 std::int64_t channels) {
  __shared__ float x_tile[kTileRows][kTileCols], dy_tile[kTileRows][kTileCols];
  __shared__ float mean_tile[kTileRows], rstd_tile[kTileRows];
  const std::int64_t first_col = static_cast<std::int64_t>(blockIdx.x) * kTileCols;
  const std::int64_t first_row = static_cast<std::int64_t>(blockIdx.y) * kTileRows;
  const auto col = static_cast<int>(threadIdx.x);  // the summing lanes: threads 0 .. kTileCols-1
  load_tile(x, rows, channels, first_row, first_col, x_tile);
  load_tile(dy, rows, channels, first_row, first_col, dy_tile);
  for (int i = static_cast<int>(threadIdx.x); i < kTileRows; i += kTileThreads) {
    mean_tile[i] = first_row + i < rows ? mean[first_row + i] : 0.0f;
    rstd_tile[i] = first_row + i < rows ? rstd[first_row + i] : 0.0f;
  }
  __syncthreads();
  if (col < kTileCols && first_col + col < channels) {
    const std::int64_t count = min(static_cast<std::int64_t>(kTileRows), rows - first_row);
    double dweight_sum = 0.0, dbias_sum = 0.0;
    for (std::int64_t i = 0; i < count; ++i) {
      const double xhat = (x_tile[i][col] - static_cast<double>(mean_tile[i])) * rstd_tile[i];
      const float grad_out = dy_tile[i][col];
      dweight_sum += grad_out * xhat;
      dbias_sum += grad_out;
    }
    const std::int64_t chunks = gridDim.y, c = first_col + col;
    partials[blockIdx.y * channels + c] = dweight_sum;
    partials[(chunks + blockIdx.y) * channels + c] = dbias_sum;
  }
}

template <class Param, class Out>
void launch_layernorm_forward(const float* x, const Param* weight, const Param* bias, Out* y,
                              float* mean, float* rstd, std::int64_t rows, std::int64_t channels,
                              cudaStream_t stream) {
  if (rows == 0) return;
  layernorm_forward_kernel<<<static_cast<unsigned int>(rows), kRowThreads, 0, stream>>>(
      x, weight, bias, y, mean, rstd, channels);
  cuda_check_launch("layernorm_forward");
}

template <class Param>
void launch_layernorm_backward(const float* x, const Param* weight, const float* mean,
                               const float* rstd, const float* dy, float* dx, float* dweight,
                               float* dbias, double* partials, std::int64_t rows,
                               std::int64_t channels, cudaStream_t stream) {
  if (rows == 0 || channels == 0) return;
  layernorm_backward_dx_kernel<<<static_cast<unsigned int>(rows), kRowThreads, 0, stream>>>(
      x, weight, mean, rstd, dy, dx, channels);
  cuda_check_launch("layernorm_backward (dx)");
  const std::int64_t chunks = column_sum_chunks(rows);
  layernorm_backward_params_kernel<<<dim3(blocks_covering(channels, kTileCols),
                                          static_cast<unsigned>(chunks)),
                                     kTileThreads, 0, stream>>>(x, mean, rstd, dy, partials, rows,
                                                                channels);
  cuda_check_launch("layernorm_backward (dweight, dbias chunks)");
  add_chunk_sums_kernel<double>
      <<<grid_for(channels, kThreads), kThreads, 0, stream>>>(partials, chunks, dweight, channels);
  add_chunk_sums_kernel<double><<<grid_for(channels, kThreads), kThreads, 0, stream>>>(
      partials + chunks * channels, chunks, dbias, channels);
  cuda_check_launch("layernorm_backward (dweight, dbias)");
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

void add_bias_rows(float* y, const std::uint16_t* b, std::int64_t rows, std::int64_t cols,
                   cudaStream_t stream) {
  launch_add_bias(y, b, y, rows, cols, stream);
  cuda_check_launch("add_bias_rows (bf16 bias)");
}

void add_bias_round_rows(const float* y, const float* b, std::uint16_t* out, std::int64_t rows,
                         std::int64_t cols, cudaStream_t stream) {
  launch_add_bias(y, b, out, rows, cols, stream);
  cuda_check_launch("add_bias_round_rows");
}

void add_bias_round_rows(const float* y, const std::uint16_t* b, std::uint16_t* out,
                         std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  launch_add_bias(y, b, out, rows, cols, stream);
  cuda_check_launch("add_bias_round_rows (bf16 bias)");
}

void add_column_sums(const float* dy, float* db, float* partials, std::int64_t rows,
                     std::int64_t cols, cudaStream_t stream) {
  if (cols == 0) return;
  const std::int64_t chunks = column_sum_chunks(rows);  // 0 rows: db + 0, as the CPU adds
  if (chunks > 0) {
    column_chunk_sums_kernel<<<dim3(blocks_covering(cols, kTileCols),
                                    static_cast<unsigned>(chunks)),
                               kTileThreads, 0, stream>>>(dy, partials, rows, cols);
    cuda_check_launch("add_column_sums (chunks)");
  }
  add_chunk_sums_kernel<float>
      <<<grid_for(cols, kThreads), kThreads, 0, stream>>>(partials, chunks, db, cols);
  cuda_check_launch("add_column_sums");
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
  if (elems == 0) return;
  gelu_tanh_forward_kernel<<<grid_for(elems, kThreads), kThreads, 0, stream>>>(x, y, elems);
  cuda_check_launch("gelu_tanh_forward");
}

void gelu_tanh_forward(const std::uint16_t* x, std::uint16_t* y, std::int64_t elems,
                       cudaStream_t stream) {
  if (elems == 0) return;
  gelu_tanh_forward_kernel<<<grid_for(elems, kThreads), kThreads, 0, stream>>>(x, y, elems);
  cuda_check_launch("gelu_tanh_forward (bf16)");
}

void gelu_tanh_backward(const float* x, const float* dy, float* dx, std::int64_t elems,
                        cudaStream_t stream) {
  if (elems == 0) return;
  gelu_tanh_backward_kernel<<<grid_for(elems, kThreads), kThreads, 0, stream>>>(x, dy, dx, elems);
  cuda_check_launch("gelu_tanh_backward");
}

void gelu_tanh_backward(const std::uint16_t* x, const float* dy, float* dx, std::int64_t elems,
                        cudaStream_t stream) {
  if (elems == 0) return;
  gelu_tanh_backward_kernel<<<grid_for(elems, kThreads), kThreads, 0, stream>>>(x, dy, dx, elems);
  cuda_check_launch("gelu_tanh_backward (bf16)");
}

void cross_entropy(const float* logits, const std::int64_t* labels, float* dlogits,
                   double* row_losses, unsigned long long* bad_index, std::int64_t rows,
                   std::int64_t classes, std::int64_t padded_classes, std::int64_t mean_rows,
                   cudaStream_t stream) {
  launch_cross_entropy(logits, labels, dlogits, row_losses, bad_index, rows, classes,
                       padded_classes, mean_rows, 1.0f, stream);
  cuda_check_launch("cross_entropy");
}

void cross_entropy(const std::uint16_t* logits, const std::int64_t* labels, std::uint16_t* dlogits,
                   double* row_losses, unsigned long long* bad_index, std::int64_t rows,
                   std::int64_t classes, std::int64_t padded_classes, std::int64_t mean_rows,
                   float scale, cudaStream_t stream) {
  launch_cross_entropy(logits, labels, dlogits, row_losses, bad_index, rows, classes,
                       padded_classes, mean_rows, scale, stream);
  cuda_check_launch("cross_entropy (bf16)");
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

void layernorm_forward(const float* x, const float* weight, const float* bias, std::uint16_t* y,
                       float* mean, float* rstd, std::int64_t rows, std::int64_t channels,
                       cudaStream_t stream) {
  launch_layernorm_forward(x, weight, bias, y, mean, rstd, rows, channels, stream);
}

void layernorm_forward(const float* x, const std::uint16_t* weight, const std::uint16_t* bias,
                       float* y, float* mean, float* rstd, std::int64_t rows, std::int64_t channels,
                       cudaStream_t stream) {
  launch_layernorm_forward(x, weight, bias, y, mean, rstd, rows, channels, stream);
}

void layernorm_forward(const float* x, const std::uint16_t* weight, const std::uint16_t* bias,
                       std::uint16_t* y, float* mean, float* rstd, std::int64_t rows,
                       std::int64_t channels, cudaStream_t stream) {
  launch_layernorm_forward(x, weight, bias, y, mean, rstd, rows, channels, stream);
}

void layernorm_backward(const float* x, const float* weight, const float* mean, const float* rstd,
                        const float* dy, float* dx, float* dweight, float* dbias,
                        double* partials, std::int64_t rows, std::int64_t channels,
                        cudaStream_t stream) {
  launch_layernorm_backward(x, weight, mean, rstd, dy, dx, dweight, dbias, partials, rows, channels,
                            stream);
}

void layernorm_backward(const float* x, const std::uint16_t* weight, const float* mean,
                        const float* rstd, const float* dy, float* dx, float* dweight, float* dbias,
                        double* partials, std::int64_t rows, std::int64_t channels,
                        cudaStream_t stream) {
  launch_layernorm_backward(x, weight, mean, rstd, dy, dx, dweight, dbias, partials, rows, channels,
                            stream);
}

}  // namespace zl::cuda
