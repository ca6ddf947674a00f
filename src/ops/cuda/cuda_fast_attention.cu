// cuda_fast_attention.cu — the launches of the fast attention kernels (cuda_fast_attention.cuh):
// forward, then backward's dq kernel and its dk/dv kernel, one template instance per head size,
// element type (fp32, bf16 or fp16 q, k, v and out) and tile format (bf16 or fp16: a 16-bit
// tensor's own, fp32's as the caller picks). 16-bit tiles come by cp.async when qkv is 16-byte
// aligned (cudaMalloc's are; a tensor cut from the middle of one may not be).
#include <cstdint>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_fast_attention_backward.cuh"
#include "ops/cuda/cuda_kernels.hpp"
#include "ops/cuda/cuda_vectors.cuh"

namespace zl::cuda {

bool fast_attention_takes(std::int64_t head_dim) {
  return fast_attention::takes_head_dim(head_dim);
}

std::size_t fast_attention_scratch_bytes(std::int64_t batch, std::int64_t seq_len,
                                         std::int64_t channels, std::int64_t heads) {
  return fast_attention::backward_scratch_bytes(batch, seq_len, channels, heads);
}

namespace {

// The launches for q, k, v and out of element type Elem (float, or Half) with tiles in Half.
template <class Elem, class Half>
void forward(const Elem* qkv, float* stats, Elem* out, std::int64_t batch, std::int64_t seq_len,
             std::int64_t channels, std::int64_t heads, float scale, cudaStream_t stream) {
  using namespace fast_attention;
  if (batch == 0 || seq_len == 0) return;
  const dim3 grid = launch_grid(batch, seq_len, heads);
  with_head_dim(channels / heads, [&]<int kD>() {
    forward_kernel<kD, Elem, Half><<<grid, kThreads, kForwardSharedBytes<kD>, stream>>>(
        qkv, stats, out, seq_len, channels, heads, scale, aligned16(qkv));
  });
  cuda_check_launch("fast_attention_forward");
}

template <class Elem, class Half>
void backward(const Elem* qkv, const float* stats, const Elem* out, const float* dout, float* dqkv,
              void* scratch, std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
              std::int64_t heads, float scale, cudaStream_t stream) {
  using namespace fast_attention;
  if (batch == 0 || seq_len == 0) return;
  const dim3 grid = launch_grid(batch, seq_len, heads);
  const BackwardScratch<Half> parts = backward_scratch<Half>(scratch, batch, seq_len, heads);
  const bool async = aligned16(qkv);
  with_head_dim(channels / heads, [&]<int kD>() {
    dq_kernel<kD, Elem, Half><<<grid, kThreads, kDqSharedBytes<kD>, stream>>>(
        qkv, stats, out, dout, dqkv, parts, seq_len, channels, heads, scale, async);
    cuda_check_launch("fast_attention_backward (dq)");
    dkv_kernel<kD, Elem, Half><<<grid, kThreads, kDkvSharedBytes<kD>, stream>>>(
        qkv, parts, dqkv, seq_len, channels, heads, scale, async);
  });
  cuda_check_launch("fast_attention_backward (dk, dv)");
}

}  // namespace

void fast_attention_forward(const float* qkv, float* stats, float* out, std::int64_t batch,
                            std::int64_t seq_len, std::int64_t channels, std::int64_t heads,
                            float scale, DType tiles, cudaStream_t stream) {
  for_half(tiles, [&]<class Half>() {
    forward<float, Half>(qkv, stats, out, batch, seq_len, channels, heads, scale, stream);
  });
}

template <class H>
void fast_attention_forward(const H* qkv, float* stats, H* out, std::int64_t batch,
                            std::int64_t seq_len, std::int64_t channels, std::int64_t heads,
                            float scale, cudaStream_t stream) {
  forward<H, H>(qkv, stats, out, batch, seq_len, channels, heads, scale, stream);
}

void fast_attention_backward(const float* qkv, const float* stats, const float* out,
                             const float* dout, float* dqkv, void* scratch, std::int64_t batch,
                             std::int64_t seq_len, std::int64_t channels, std::int64_t heads,
                             float scale, DType tiles, cudaStream_t stream) {
  for_half(tiles, [&]<class Half>() {
    backward<float, Half>(qkv, stats, out, dout, dqkv, scratch, batch, seq_len, channels, heads,
                          scale, stream);
  });
}

template <class H>
void fast_attention_backward(const H* qkv, const float* stats, const H* out, const float* dout,
                             float* dqkv, void* scratch, std::int64_t batch, std::int64_t seq_len,
                             std::int64_t channels, std::int64_t heads, float scale,
                             cudaStream_t stream) {
  backward<H, H>(qkv, stats, out, dout, dqkv, scratch, batch, seq_len, channels, heads, scale,
                 stream);
}

template void fast_attention_forward(const std::uint16_t*, float*, std::uint16_t*, std::int64_t,
                                     std::int64_t, std::int64_t, std::int64_t, float, cudaStream_t);
template void fast_attention_forward(const Fp16*, float*, Fp16*, std::int64_t, std::int64_t,
                                     std::int64_t, std::int64_t, float, cudaStream_t);
template void fast_attention_backward(const std::uint16_t*, const float*, const std::uint16_t*,
                                      const float*, float*, void*, std::int64_t, std::int64_t,
                                      std::int64_t, std::int64_t, float, cudaStream_t);
template void fast_attention_backward(const Fp16*, const float*, const Fp16*, const float*, float*,
                                      void*, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                                      float, cudaStream_t);

}  // namespace zl::cuda
