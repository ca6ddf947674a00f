// cuda_layernorm.cu — the CUDA Device's LayerNorm: forward and dx a warp per row in double, as
// the CPU's ops/cpu kernel computes them (only the order of a row's sums differs: a warp's tree),
// and the weight and bias gradients summed in ops/column_sums.hpp's chunks, so their bits are the
// CPU's. The weight and bias may be read in bf16 or fp16 (a 16-bit unit's parameters, as kept),
// and y written in either.
#include <cstdint>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_column_sums.cuh"
#include "ops/cuda/cuda_elements.cuh"
#include "ops/cuda/cuda_kernels.hpp"
#include "ops/cuda/cuda_reduce_block.cuh"

namespace zl::cuda {

namespace {

// The CPU kernel's epsilon, spelled the same way so it rounds to the same double.
constexpr double kLayerNormEps = 1e-5;

// LayerNorm over rows of x [rows, C]: a warp per row, kNormRowsPerBlock rows a block.

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

}  // namespace

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

#define ZL_SIXTEEN_BIT_LAUNCHERS(H)                                                             \
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
