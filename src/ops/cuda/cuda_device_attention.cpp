// cuda_device_attention.cpp — CudaDevice's attention: which kernels run (AttentionKind), the
// fast kernels' launches (cuda_fast_attention.cu), the tiled exact kernels'
// (cuda_tiled_attention.cu) with the shapes they refuse, and the cuBLAS path of AttentionKind::Gemm (strided-batched GEMMs
// around cuda_attention.cu's softmax kernels, one batch element's scores in scratch).
#include <limits>

#include "core/error.hpp"
#include "ops/cuda/cublas_library.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_device.hpp"
#include "ops/cuda/cuda_kernels.hpp"

namespace zl {

void CudaDevice::gemm_heads(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n,
                            std::int64_t k, float alpha, const float* a, std::int64_t lda,
                            std::int64_t stride_a, const float* b, std::int64_t ldb,
                            std::int64_t stride_b, float* c, std::int64_t ldc,
                            std::int64_t stride_c, std::int64_t batch) {
  const float beta = 0.0f;
  ZL_CUBLAS_CHECK(cublas().SgemmStridedBatched(
      cublas_, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
      cublas_int(m, "M"), cublas_int(n, "N"), cublas_int(k, "K"), &alpha, a, cublas_int(lda, "lda"),
      stride_a, b, cublas_int(ldb, "ldb"), stride_b, &beta, c, cublas_int(ldc, "ldc"), stride_c,
      cublas_int(batch, "heads")));
}

AttentionKind CudaDevice::attention_for(std::int64_t head_dim) const {
  switch (attention_) {
    case AttentionKind::Default:  // fp32 training keeps fp32 attention
      return half_gemms_ != DType::F32 && cuda::fast_attention_takes(head_dim)
                 ? AttentionKind::Fast
                 : AttentionKind::Exact;
    case AttentionKind::Fast:
      ZL_CHECK(cuda::fast_attention_takes(head_dim),
               "attention fast: the head size is {} (channels / heads); the fast kernels take 16, "
               "32 or 64: use --attention exact, or heads that give one of those",
               head_dim);
      return AttentionKind::Fast;
    default:
      return attention_;
  }
}

void CudaDevice::check_tiled_attention(std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                                       std::int64_t head_dim) const {
  ZL_CHECK(head_dim <= cuda::kTiledAttentionMaxHeadDim,
           "attention: the head size is {} (channels / heads), above the CUDA attention's {}: use "
           "more heads, or ZL_CUDA_ATTENTION=gemm",
           head_dim, cuda::kTiledAttentionMaxHeadDim);
  ZL_CHECK((seq_len + 31) / 32 <= 65535,
           "attention: the sequence length {} is above the CUDA attention's {}: use a shorter "
           "--block-size",
           seq_len, 65535 * 32);
  ZL_CHECK(batch * heads <= std::numeric_limits<int>::max(),
           "attention: {} x {} (batch x heads) sequences are more than one CUDA launch takes: use "
           "a smaller micro-batch",
           batch, heads);
}

// In cuBLAS's column-major view a row-major [T, D] head of q (rows 3C floats apart) is a D x T
// matrix with leading dimension 3C, and a row-major [T, T] probs block is its transpose, T x T
// with leading dimension T: each row-major product below is written as the column-major one of
// the transposes, heads batched D floats apart in qkv and out and T * T apart in probs. The
// probabilities of one batch element live in device scratch only while it is computed; what
// stays is each row's stats, from which backward rebuilds the same probabilities.
void CudaDevice::do_attention_forward(std::span<const float> qkv, std::span<float> stats,
                                      std::span<float> out, std::int64_t batch,
                                      std::int64_t seq_len, std::int64_t channels,
                                      std::int64_t heads) {
  const std::int64_t T = seq_len, C = channels, D = channels / heads;
  select();
  const auto scale = static_cast<float>(attention_scale(D));
  const AttentionKind kind = attention_for(D);
  if (kind != AttentionKind::Gemm) check_tiled_attention(batch, T, heads, D);
  if (kind == AttentionKind::Fast) {
    cuda::fast_attention_forward(qkv.data(), stats.data(), out.data(), batch, T, C, heads, scale,
                                 attention_tiles(), stream_);
    return;
  }
  if (kind == AttentionKind::Exact) {
    cuda::tiled_attention_forward(qkv.data(), stats.data(), out.data(), batch, T, C, heads, scale,
                                  stream_);
    return;
  }
  auto* p = static_cast<float*>(scratch(static_cast<std::size_t>(heads * T * T) * sizeof(float)));
  for (std::int64_t b = 0; b < batch; ++b) {
    const float* q = qkv.data() + b * T * 3 * C;
    // scoresᵀ (s, t) = k_s . q_t * scale
    gemm_heads(true, false, T, T, D, scale, q + C, 3 * C, D, q, 3 * C, D, p, T, T * T, heads);
    cuda::causal_softmax(p, stats.data() + b * heads * T * kAttentionStatsPerRow, heads * T, T,
                         stream_);
    // outᵀ (d, t) = sum_s v_s[d] p_ts
    gemm_heads(false, false, D, T, T, 1.0f, q + 2 * C, 3 * C, D, p, T, T * T,
               out.data() + b * T * C, C, D, heads);
  }
}

void CudaDevice::do_attention_backward(std::span<const float> qkv, std::span<const float> stats,
                                       std::span<const float> out, std::span<const float> dout,
                                       std::span<float> dqkv,
                                       std::int64_t batch, std::int64_t seq_len,
                                       std::int64_t channels, std::int64_t heads) {
  const std::int64_t T = seq_len, C = channels, D = channels / heads;
  select();
  const auto scale = static_cast<float>(attention_scale(D));
  const AttentionKind kind = attention_for(D);
  if (kind != AttentionKind::Gemm) {
    check_tiled_attention(batch, T, heads, D);
    if (kind == AttentionKind::Fast) {
      cuda::fast_attention_backward(qkv.data(), stats.data(), out.data(), dout.data(), dqkv.data(),
                                    scratch(cuda::fast_attention_scratch_bytes(batch, T, C, heads)),
                                    batch, T, C, heads, scale, attention_tiles(), stream_);
      return;
    }
    auto* delta =
        static_cast<float*>(scratch(static_cast<std::size_t>(batch * heads * T) * sizeof(float)));
    cuda::tiled_attention_backward(qkv.data(), stats.data(), out.data(), dout.data(), dqkv.data(),
                                   delta, batch, T, C, heads, scale, stream_);
    return;
  }
  const std::int64_t block = heads * T * T;
  auto* p = static_cast<float*>(scratch(static_cast<std::size_t>(2 * block) * sizeof(float)));
  float* dscores = p + block;
  for (std::int64_t b = 0; b < batch; ++b) {
    const float* q = qkv.data() + b * T * 3 * C;
    const float* dy = dout.data() + b * T * C;
    float* dq = dqkv.data() + b * T * 3 * C;
    // forward's probabilities again: the same scores GEMM, then exp(score - m) / l per row
    gemm_heads(true, false, T, T, D, scale, q + C, 3 * C, D, q, 3 * C, D, p, T, T * T, heads);
    cuda::causal_softmax_from_stats(p, stats.data() + b * heads * T * kAttentionStatsPerRow,
                                    heads * T, T, stream_);
    // dprobsᵀ (s, t) = v_s . dout_t, then dscores in place
    gemm_heads(true, false, T, T, D, 1.0f, q + 2 * C, 3 * C, D, dy, C, D, dscores, T, T * T, heads);
    cuda::causal_softmax_backward(p, dscores, heads * T, T, stream_);
    // dqᵀ (d, t) = scale * sum_s k_s[d] dscores_ts
    gemm_heads(false, false, D, T, T, scale, q + C, 3 * C, D, dscores, T, T * T, dq, 3 * C, D,
               heads);
    // dkᵀ (d, s) = scale * sum_t q_t[d] dscores_ts
    gemm_heads(false, true, D, T, T, scale, q, 3 * C, D, dscores, T, T * T, dq + C, 3 * C, D,
               heads);
    // dvᵀ (d, s) = sum_t dout_t[d] p_ts
    gemm_heads(false, true, D, T, T, 1.0f, dy, C, D, p, T, T * T, dq + 2 * C, 3 * C, D, heads);
  }
}

}  // namespace zl
