// cuda_attention.cu — the row-wise halves of causal attention on the GPU: the causal softmax of a
// [rows, T] block of scores (in place, into probabilities, keeping each row's max and sum of
// exponentials), the same probabilities rebuilt from those stats, and the softmax's backward (in
// place, from dprobs into dscores). CudaDevice::do_attention_forward/backward put them between
// cuBLAS's strided-batched fp32 GEMMs (QKᵀ, PV; QKᵀ again, dout Vᵀ, dS K, dSᵀ Q, Pᵀ dout), on one
// batch element's scores at a time in device scratch: only the stats outlive a call, as on the
// CPU (cpu_attention.cpp, the specification).
//
// One warp per row, the warp's lanes striding over the row's T entries; every sum in double,
// lanes combined by a fixed shuffle tree, so a row's result is the same on every run.
#include <cmath>
#include <cstdint>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_kernels.hpp"
#include "ops/cuda/cuda_reduce_block.cuh"

namespace zl::cuda {

namespace {

constexpr int kRowsPerBlock = 8;  // warps per block

// The row of scores this thread's warp works on, the thread's lane in it, and the row's query
// position t (rows are [.., T] blocks, one per head and batch element).
struct WarpRow {
  std::int64_t row;
  int lane;
  std::int64_t t;
};

__device__ WarpRow warp_row(std::int64_t seq_len) {
  const std::int64_t row =
      static_cast<std::int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarpThreads;
  return {row, static_cast<int>(threadIdx.x % kWarpThreads), row % seq_len};
}

// A probability from its score and the row's stats {m, l}: in double, rounded once (the CPU's
// definition).
__device__ float probability(float score, float m, float l) {
  return static_cast<float>(exp(static_cast<double>(score) - m) / static_cast<double>(l));
}

// Row r of `scores` [rows, T] is query position t = r % T: m = the largest score over s <= t,
// l = sum exp(score - m) rounded to float, kept in stats[r]; entries s <= t become the
// probability, entries s > t become 0.
__global__ void causal_softmax_kernel(float* scores, float* stats, std::int64_t rows,
                                      std::int64_t seq_len) {
  const WarpRow at = warp_row(seq_len);
  if (at.row >= rows) return;
  const std::int64_t row = at.row, t = at.t;
  const int lane = at.lane;
  float* p = scores + row * seq_len;
  float local_max = -INFINITY;
  for (std::int64_t s = lane; s <= t; s += kWarpThreads) local_max = fmaxf(local_max, p[s]);
  const auto m = static_cast<float>(warp_max(local_max));
  double local_sum = 0.0;
  for (std::int64_t s = lane; s <= t; s += kWarpThreads) {
    local_sum += exp(static_cast<double>(p[s]) - m);
  }
  const auto l = static_cast<float>(warp_sum(local_sum));
  if (lane == 0) {
    stats[row * 2] = m;
    stats[row * 2 + 1] = l;
  }
  for (std::int64_t s = lane; s < seq_len; s += kWarpThreads)
    p[s] = s <= t ? probability(p[s], m, l) : 0.0f;
}

// Row r's probabilities again, from its scores and the stats the forward kernel kept.
__global__ void causal_softmax_from_stats_kernel(float* scores, const float* stats,
                                                 std::int64_t rows, std::int64_t seq_len) {
  const WarpRow at = warp_row(seq_len);
  if (at.row >= rows) return;
  const std::int64_t row = at.row, t = at.t;
  const int lane = at.lane;
  float* p = scores + row * seq_len;
  const float m = stats[row * 2], l = stats[row * 2 + 1];
  for (std::int64_t s = lane; s < seq_len; s += kWarpThreads)
    p[s] = s <= t ? probability(p[s], m, l) : 0.0f;
}

// Row r (query position t = r % T): with w = sum_{s <= t} p_s dp_s, dp_s becomes
// p_s (dp_s - w) for s <= t and 0 for s > t.
__global__ void causal_softmax_backward_kernel(const float* probs, float* dprobs, std::int64_t rows,
                                               std::int64_t seq_len) {
  const WarpRow at = warp_row(seq_len);
  if (at.row >= rows) return;
  const std::int64_t row = at.row, t = at.t;
  const int lane = at.lane;
  const float* p = probs + row * seq_len;
  float* dp = dprobs + row * seq_len;
  double local = 0.0;
  for (std::int64_t s = lane; s <= t; s += kWarpThreads) local += static_cast<double>(p[s]) * dp[s];
  const double weighted = warp_sum(local);
  for (std::int64_t s = lane; s < seq_len; s += kWarpThreads)
    dp[s] = s <= t ? static_cast<float>(p[s] * (dp[s] - weighted)) : 0.0f;
}

}  // namespace

void causal_softmax(float* scores, float* stats, std::int64_t rows, std::int64_t seq_len,
                    cudaStream_t stream) {
  if (rows == 0 || seq_len == 0) return;
  causal_softmax_kernel<<<blocks_covering(rows, kRowsPerBlock), kRowsPerBlock * kWarpThreads, 0,
                          stream>>>(scores, stats, rows, seq_len);
  cuda_check_launch("causal_softmax");
}

void causal_softmax_from_stats(float* scores, const float* stats, std::int64_t rows,
                               std::int64_t seq_len, cudaStream_t stream) {
  if (rows == 0 || seq_len == 0) return;
  causal_softmax_from_stats_kernel<<<blocks_covering(rows, kRowsPerBlock),
                                     kRowsPerBlock * kWarpThreads, 0, stream>>>(scores, stats, rows,
                                                                                seq_len);
  cuda_check_launch("causal_softmax_from_stats");
}

void causal_softmax_backward(const float* probs, float* dprobs, std::int64_t rows,
                             std::int64_t seq_len, cudaStream_t stream) {
  if (rows == 0 || seq_len == 0) return;
  causal_softmax_backward_kernel<<<blocks_covering(rows, kRowsPerBlock),
                                   kRowsPerBlock * kWarpThreads, 0, stream>>>(probs, dprobs, rows,
                                                                              seq_len);
  cuda_check_launch("causal_softmax_backward");
}

}  // namespace zl::cuda
