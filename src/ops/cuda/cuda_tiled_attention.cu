// cuda_tiled_attention.cu — the launches of the tiled attention kernels (cuda_tiled_attention.cuh):
// forward, then backward's dq kernel and its dk/dv kernel, each with the shared memory its head
// size needs.
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_kernels.hpp"
#include "ops/cuda/cuda_tiled_attention.cuh"

namespace zl::cuda {

namespace {

static_assert(kTiledAttentionMaxHeadDim == 8 * kWarpThreads,
              "with_channels_per_lane covers 8 channels per lane");

// Lets `kernel` use `bytes` of dynamic shared memory (above 48 KiB a kernel must ask).
template <class Kernel>
void allow_shared_bytes(Kernel kernel, std::size_t bytes) {
  ZL_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(bytes)));
}

}  // namespace

void tiled_attention_forward(const float* qkv, float* stats, float* out, std::int64_t batch,
                             std::int64_t seq_len, std::int64_t channels, std::int64_t heads,
                             float scale, cudaStream_t stream) {
  using namespace tiled_attention;
  if (batch == 0 || seq_len == 0) return;
  const int D = static_cast<int>(channels / heads);
  const Launch at = launch_shape(batch, seq_len, heads);
  with_channels_per_lane(D, [&]<int kDPerLane>() {
    const std::size_t bytes = forward_shared_bytes(D);
    allow_shared_bytes(forward_kernel<kDPerLane>, bytes);
    forward_kernel<kDPerLane><<<at.grid, at.block, bytes, stream>>>(
        qkv, stats, out, seq_len, channels, D, heads, scale, at.tiles);
  });
  cuda_check_launch("tiled_attention_forward");
}

void tiled_attention_backward(const float* qkv, const float* stats, const float* out,
                              const float* dout, float* dqkv, float* delta, std::int64_t batch,
                              std::int64_t seq_len, std::int64_t channels, std::int64_t heads,
                              float scale, cudaStream_t stream) {
  using namespace tiled_attention;
  if (batch == 0 || seq_len == 0) return;
  const int D = static_cast<int>(channels / heads);
  const Launch at = launch_shape(batch, seq_len, heads);
  with_channels_per_lane(D, [&]<int kDPerLane>() {
    const std::size_t dq_bytes = dq_shared_bytes(D);
    allow_shared_bytes(dq_kernel<kDPerLane>, dq_bytes);
    dq_kernel<kDPerLane><<<at.grid, at.block, dq_bytes, stream>>>(
        qkv, stats, out, dout, dqkv, delta, seq_len, channels, D, heads, scale, at.tiles);
    cuda_check_launch("tiled_attention_backward (dq)");
    const std::size_t dkv_bytes = dkv_shared_bytes(D);
    allow_shared_bytes(dkv_kernel<kDPerLane>, dkv_bytes);
    dkv_kernel<kDPerLane><<<at.grid, at.block, dkv_bytes, stream>>>(
        qkv, stats, dout, delta, dqkv, seq_len, channels, D, heads, scale, at.tiles);
  });
  cuda_check_launch("tiled_attention_backward (dk, dv)");
}

}  // namespace zl::cuda
