// cuda_kernels.cu — the CUDA Device's kernels besides the GEMMs and attention: bias and bias
// gradient, GELU (erf, and tanh through ops/gelu_tanh.hpp, the CPU's own code), cross-entropy,
// LayerNorm. Each mirrors its CPU twin
// (ops/cpu/*.cpp): where the CPU sums in double, so does the kernel, and elementwise results are
// computed in double and rounded once. What differs is only the order of block-wide sums (a tree,
// not a loop); sums that must match the CPU's order keep it: bias and LayerNorm weight and bias
// gradients in ops/column_sums.hpp's chunks (a block per chunk of rows and tile of columns, then
// the chunks in order). A bias or a LayerNorm's weight and bias may be read in bf16 (a 16-bit
// unit's parameters, as they are kept). The embeddings are in cuda_embedding.cu.
#include <cstdint>
#include <numbers>

#include "ops/column_sums.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_elements.cuh"
#include "ops/cuda/cuda_kernels.hpp"
#include "ops/cuda/cuda_reduce_block.cuh"
#include "ops/gelu_tanh.hpp"

namespace zl::cuda {

namespace {

constexpr int kThreads = 256;
// The CPU kernels' constants, spelled the same way so they round to the same doubles.
constexpr double kLayerNormEps = 1e-5;
constexpr double kInvSqrt2 = 1.0 / std::numbers::sqrt2;
constexpr double kInvSqrt2Pi = std::numbers::inv_sqrtpi / std::numbers::sqrt2;

// ---- bias ----

template <class Bias>
__global__ void add_bias_rows_kernel(float* y, const Bias* b, std::int64_t rows,
                                     std::int64_t cols) {
  for (std::int64_t i = global_index(); i < rows * cols; i += global_stride()) {
    y[i] += get(b + i % cols);
  }
}

template <class Bias>
__global__ void add_bias_round_rows_kernel(const float* y, const Bias* b, std::uint16_t* out,
                                           std::int64_t rows, std::int64_t cols) {
  for (std::int64_t i = global_index(); i < rows * cols; i += global_stride()) {
    out[i] = to_bf16(b == nullptr ? y[i] : y[i] + get(b + i % cols));
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

// dlogits are multiplied by `scale` (one float multiply, exact at 1) and written in Out's dtype.
template <class In, class Out>
__global__ void cross_entropy_kernel(const In* logits, const std::int64_t* labels, Out* dlogits,
                                     double* row_losses, unsigned long long* bad_index,
                                     std::int64_t classes, std::int64_t padded_classes,
                                     std::int64_t mean_rows, float scale) {
  __shared__ double partials[32];
  const std::int64_t r = blockIdx.x;
  const std::int64_t label = labels[r];
  if (label < 0 || label >= classes) {  // the whole block leaves together
    if (threadIdx.x == 0) atomicMin(bad_index, static_cast<unsigned long long>(r));
    return;
  }
  const In* row = logits + r * padded_classes;
  Out* drow = dlogits + r * padded_classes;
  // Read before the reductions' barriers: in place, another thread writes drow[label] after them.
  const double label_logit = get(row + label);
  // Subtracting the row max keeps every exp in (0, 1]; a max is exact in any order.
  double local_max = -INFINITY;
  for (std::int64_t c = threadIdx.x; c < classes; c += blockDim.x)
    local_max = fmax(local_max, static_cast<double>(get(row + c)));
  const double max_logit = block_max(local_max, partials);
  double local_sum = 0.0;
  for (std::int64_t c = threadIdx.x; c < classes; c += blockDim.x)
    local_sum += exp(get(row + c) - max_logit);
  const double exp_sum = block_sum(local_sum, partials);
  if (threadIdx.x == 0) row_losses[r] = log(exp_sum) - (label_logit - max_logit);
  for (std::int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
    const double softmax = exp(get(row + c) - max_logit) / exp_sum;
    const double target = c == label ? 1.0 : 0.0;
    put(drow + c, static_cast<float>((softmax - target) / static_cast<double>(mean_rows)) * scale);
  }
  for (std::int64_t c = classes + threadIdx.x; c < padded_classes; c += blockDim.x) {
    put(drow + c, 0.0f * scale);
  }
}

// One thread: the row losses in row order, as the CPU sums them, then one addition.
__global__ void add_row_losses_kernel(const double* row_losses, std::int64_t rows,
                                      double* loss_sum) {
  double sum = 0.0;
  for (std::int64_t r = 0; r < rows; ++r) sum += row_losses[r];
  loss_sum[0] = loss_sum[0] + sum;
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

}  // namespace

void add_bias_rows(float* y, const float* b, std::int64_t rows, std::int64_t cols,
                   cudaStream_t stream) {
  if (rows * cols == 0) return;
  add_bias_rows_kernel<<<grid_for(rows * cols, kThreads), kThreads, 0, stream>>>(y, b, rows, cols);
  cuda_check_launch("add_bias_rows");
}

void add_bias_rows(float* y, const std::uint16_t* b, std::int64_t rows, std::int64_t cols,
                   cudaStream_t stream) {
  if (rows * cols == 0) return;
  add_bias_rows_kernel<<<grid_for(rows * cols, kThreads), kThreads, 0, stream>>>(y, b, rows, cols);
  cuda_check_launch("add_bias_rows (bf16 bias)");
}

void add_bias_round_rows(const float* y, const float* b, std::uint16_t* out, std::int64_t rows,
                         std::int64_t cols, cudaStream_t stream) {
  if (rows * cols == 0) return;
  add_bias_round_rows_kernel<<<grid_for(rows * cols, kThreads), kThreads, 0, stream>>>(y, b, out,
                                                                                       rows, cols);
  cuda_check_launch("add_bias_round_rows");
}

void add_bias_round_rows(const float* y, const std::uint16_t* b, std::uint16_t* out,
                         std::int64_t rows, std::int64_t cols, cudaStream_t stream) {
  if (rows * cols == 0) return;
  add_bias_round_rows_kernel<<<grid_for(rows * cols, kThreads), kThreads, 0, stream>>>(y, b, out,
                                                                                       rows, cols);
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
  cross_entropy_kernel<<<static_cast<unsigned int>(rows), kRowThreads, 0, stream>>>(
      logits, labels, dlogits, row_losses, bad_index, classes, padded_classes, mean_rows, 1.0f);
  cuda_check_launch("cross_entropy");
}

void cross_entropy(const std::uint16_t* logits, const std::int64_t* labels, std::uint16_t* dlogits,
                   double* row_losses, unsigned long long* bad_index, std::int64_t rows,
                   std::int64_t classes, std::int64_t padded_classes, std::int64_t mean_rows,
                   float scale, cudaStream_t stream) {
  cross_entropy_kernel<<<static_cast<unsigned int>(rows), kRowThreads, 0, stream>>>(
      logits, labels, dlogits, row_losses, bad_index, classes, padded_classes, mean_rows, scale);
  cuda_check_launch("cross_entropy (bf16)");
}

void add_mean_loss(const double* loss_sum, std::int64_t rows, float* total, cudaStream_t stream) {
  add_mean_loss_kernel<<<1, 1, 0, stream>>>(loss_sum, static_cast<double>(rows), total);
  cuda_check_launch("add_mean_loss");
}

void add_row_losses(const double* row_losses, std::int64_t rows, double* loss_sum,
                    cudaStream_t stream) {
  add_row_losses_kernel<<<1, 1, 0, stream>>>(row_losses, rows, loss_sum);
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
