// cuda_attention.cu — causal multi-head self-attention on the GPU, forward and backward: a
// materialised-softmax kernel (probs [B, heads, T, T] kept for backward, as on the CPU and in
// llm.c), not flash attention. It mirrors cpu_attention.cpp: dot products, the softmax and every
// gradient sum in double, each output rounded once; only the softmax's max and sum (and the
// backward's row term) are block-wide sums in a tree order. Each row's scores sit in shared
// memory as doubles (8*T bytes per block), which bounds T at about 29 000 on Hopper.
//
// qkv is [B, T, 3C]: q, k, v side by side; head h is channels [h*D, (h+1)*D) of each.
#include <cmath>
#include <cstdint>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_kernels.hpp"
#include "ops/cuda/cuda_reduce_block.cuh"

namespace zl::cuda {

namespace {

// One block per (b, h, t): scores[s] = q_t . k_s * scale for s <= t, the softmax written to
// probs row t, then out_t [D] = sum_s p_ts v_s with the probabilities as stored.
__global__ void attention_forward_kernel(const float* qkv, float* probs, float* out,
                                         std::int64_t seq_len, std::int64_t channels,
                                         std::int64_t heads, double scale) {
  extern __shared__ double scores[];  // [T]
  __shared__ double partials[32];
  const std::int64_t T = seq_len, C = channels, D = channels / heads;
  const std::int64_t row = blockIdx.x;  // (b * heads + h) * T + t
  const std::int64_t t = row % T, h = (row / T) % heads, b = row / (T * heads);
  const float* q = qkv + (b * T + t) * 3 * C + h * D;
  double local_max = -INFINITY;
  for (std::int64_t s = threadIdx.x; s <= t; s += blockDim.x) {
    const float* k = qkv + (b * T + s) * 3 * C + C + h * D;
    double dot = 0.0;
    for (std::int64_t d = 0; d < D; ++d) dot += static_cast<double>(q[d]) * k[d];
    scores[s] = dot * scale;
    local_max = fmax(local_max, scores[s]);
  }
  const double max_score = block_max(local_max, partials);
  double local_sum = 0.0;
  for (std::int64_t s = threadIdx.x; s <= t; s += blockDim.x)
    local_sum += exp(scores[s] - max_score);
  const double exp_sum = block_sum(local_sum, partials);
  float* p = probs + row * T;
  for (std::int64_t s = threadIdx.x; s < T; s += blockDim.x) {
    const float prob = s <= t ? static_cast<float>(exp(scores[s] - max_score) / exp_sum) : 0.0f;
    p[s] = prob;
    if (s <= t) scores[s] = prob;  // out uses the probabilities as stored, as backward does
  }
  __syncthreads();
  float* o = out + (b * T + t) * C + h * D;
  for (std::int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    double acc = 0.0;
    for (std::int64_t s = 0; s <= t; ++s) {
      const float* v = qkv + (b * T + s) * 3 * C + 2 * C + h * D;
      acc += scores[s] * v[d];
    }
    o[d] = static_cast<float>(acc);
  }
}

// One block per (b, h, t): dprobs_s = dout_t . v_s, the softmax backward's row term
// weighted_t = sum_s p_ts dprobs_s (kept in row_terms for the dk/dv kernel), and
// dq_t = scale * sum_s p_ts (dprobs_s - weighted_t) k_s.
__global__ void attention_backward_dq_kernel(const float* qkv, const float* probs,
                                             const float* dout, float* dqkv, double* row_terms,
                                             std::int64_t seq_len, std::int64_t channels,
                                             std::int64_t heads, double scale) {
  extern __shared__ double dprobs[];  // [T]
  __shared__ double partials[32];
  const std::int64_t T = seq_len, C = channels, D = channels / heads;
  const std::int64_t row = blockIdx.x;
  const std::int64_t t = row % T, h = (row / T) % heads, b = row / (T * heads);
  const float* p = probs + row * T;
  const float* grad_out = dout + (b * T + t) * C + h * D;
  double local = 0.0;
  for (std::int64_t s = threadIdx.x; s <= t; s += blockDim.x) {
    const float* v = qkv + (b * T + s) * 3 * C + 2 * C + h * D;
    double dot = 0.0;
    for (std::int64_t d = 0; d < D; ++d) dot += static_cast<double>(grad_out[d]) * v[d];
    dprobs[s] = dot;
    local += p[s] * dot;
  }
  const double weighted = block_sum(local, partials);  // ends with a barrier: dprobs is complete
  if (threadIdx.x == 0) row_terms[row] = weighted;
  float* dq_out = dqkv + (b * T + t) * 3 * C + h * D;
  for (std::int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    double dq = 0.0;
    for (std::int64_t s = 0; s <= t; ++s) {
      const float* k = qkv + (b * T + s) * 3 * C + C + h * D;
      const double dscore = p[s] * (dprobs[s] - weighted);  // d loss / d (q_t . k_s * scale)
      dq += dscore * k[d];
    }
    dq_out[d] = static_cast<float>(dq * scale);
  }
}

// One block per (b, h, s): dscore_ts = p_ts (dout_t . v_s - weighted_t) for t >= s (the dot
// recomputed, not stored), then dk_s = scale * sum_t dscore_ts q_t and dv_s = sum_t p_ts dout_t,
// t in order s, s+1, ..., as the CPU accumulates them.
__global__ void attention_backward_dkv_kernel(const float* qkv, const float* probs,
                                              const float* dout, float* dqkv,
                                              const double* row_terms, std::int64_t seq_len,
                                              std::int64_t channels, std::int64_t heads,
                                              double scale) {
  extern __shared__ double dscores[];  // [T], entries t >= s used
  const std::int64_t T = seq_len, C = channels, D = channels / heads;
  const std::int64_t key = blockIdx.x;  // (b * heads + h) * T + s
  const std::int64_t s = key % T, bh = key / T, h = bh % heads, b = bh / heads;
  const float* v = qkv + (b * T + s) * 3 * C + 2 * C + h * D;
  for (std::int64_t t = s + threadIdx.x; t < T; t += blockDim.x) {
    const float* grad_out = dout + (b * T + t) * C + h * D;
    double dot = 0.0;
    for (std::int64_t d = 0; d < D; ++d) dot += static_cast<double>(grad_out[d]) * v[d];
    dscores[t] = probs[(bh * T + t) * T + s] * (dot - row_terms[bh * T + t]);
  }
  __syncthreads();
  float* dk_out = dqkv + (b * T + s) * 3 * C + C + h * D;
  float* dv_out = dk_out + C;
  for (std::int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    double dk = 0.0, dv = 0.0;
    for (std::int64_t t = s; t < T; ++t) {
      const float* q = qkv + (b * T + t) * 3 * C + h * D;
      const float* grad_out = dout + (b * T + t) * C + h * D;
      dk += dscores[t] * q[d];
      dv += static_cast<double>(probs[(bh * T + t) * T + s]) * grad_out[d];
    }
    dk_out[d] = static_cast<float>(dk * scale);
    dv_out[d] = static_cast<float>(dv);
  }
}

// Dynamic shared memory of `bytes` for `kernel`, raising its limit past the default 48 KiB.
template <class Kernel>
void allow_shared_bytes(Kernel kernel, std::size_t bytes, const char* name) {
  constexpr std::size_t kDefaultLimitBytes = 48 * 1024;
  if (bytes <= kDefaultLimitBytes) return;
  cuda_check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  static_cast<int>(bytes)),
             name);
}

}  // namespace

void attention_forward(const float* qkv, float* probs, float* out, std::int64_t batch,
                       std::int64_t seq_len, std::int64_t channels, std::int64_t heads,
                       cudaStream_t stream) {
  const std::int64_t rows = batch * heads * seq_len;
  if (rows == 0) return;
  const double scale = 1.0 / std::sqrt(static_cast<double>(channels / heads));
  const auto shared_bytes = static_cast<std::size_t>(seq_len) * sizeof(double);
  allow_shared_bytes(attention_forward_kernel, shared_bytes,
                     "cudaFuncSetAttribute(attention_forward_kernel, max dynamic shared memory)");
  attention_forward_kernel<<<static_cast<unsigned int>(rows), kRowThreads, shared_bytes, stream>>>(
      qkv, probs, out, seq_len, channels, heads, scale);
  cuda_check_launch("attention_forward");
}

void attention_backward(const float* qkv, const float* probs, const float* dout, float* dqkv,
                        double* row_terms, std::int64_t batch, std::int64_t seq_len,
                        std::int64_t channels, std::int64_t heads, cudaStream_t stream) {
  const std::int64_t rows = batch * heads * seq_len;
  if (rows == 0) return;
  const double scale = 1.0 / std::sqrt(static_cast<double>(channels / heads));
  const auto shared_bytes = static_cast<std::size_t>(seq_len) * sizeof(double);
  allow_shared_bytes(
      attention_backward_dq_kernel, shared_bytes,
      "cudaFuncSetAttribute(attention_backward_dq_kernel, max dynamic shared memory)");
  allow_shared_bytes(
      attention_backward_dkv_kernel, shared_bytes,
      "cudaFuncSetAttribute(attention_backward_dkv_kernel, max dynamic shared memory)");
  attention_backward_dq_kernel<<<static_cast<unsigned int>(rows), kRowThreads, shared_bytes,
                                 stream>>>(qkv, probs, dout, dqkv, row_terms, seq_len, channels,
                                           heads, scale);
  cuda_check_launch("attention_backward (dq)");
  attention_backward_dkv_kernel<<<static_cast<unsigned int>(rows), kRowThreads, shared_bytes,
                                  stream>>>(qkv, probs, dout, dqkv, row_terms, seq_len, channels,
                                            heads, scale);
  cuda_check_launch("attention_backward (dk, dv)");
}

}  // namespace zl::cuda
