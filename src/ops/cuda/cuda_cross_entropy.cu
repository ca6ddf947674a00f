// cuda_cross_entropy.cu — the CUDA Device's cross-entropy: one block per row of logits
// [rows, padded_classes], of which the first `classes` columns are classes and the rest padding
// (zero gradient); the rows' losses added in row order, as the CPU sums them, and the micro-batch's
// mean added to the step's loss on the device. Logits and their gradients in fp32, bf16 or fp16.
#include <cstdint>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_elements.cuh"
#include "ops/cuda/cuda_kernels.hpp"
#include "ops/cuda/cuda_reduce_block.cuh"
#include "ops/cuda/cuda_vectors.cuh"

namespace zl::cuda {

namespace {

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

template void cross_entropy(const std::uint16_t*, const std::int64_t*, std::uint16_t*, double*,
                            unsigned long long*, std::int64_t, std::int64_t, std::int64_t,
                            std::int64_t, float, cudaStream_t);
template void cross_entropy(const Fp16*, const std::int64_t*, Fp16*, double*, unsigned long long*,
                            std::int64_t, std::int64_t, std::int64_t, std::int64_t, float,
                            cudaStream_t);

}  // namespace zl::cuda
