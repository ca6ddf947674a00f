// cuda_embedding.cu — the CUDA Device's GPT-2 embeddings, tokens [B, T] (N = B*T rows), wte
// [vocab, C], wpe [T, C], x [N, C]. Forward reads the tables in fp32 or bf16 (a 16-bit unit's
// parameters as they are kept) and adds in fp32, as the CPU does on the widened values. Backward
// keeps the CPU's order: the token embedding's gradient adds a token's rows in order
// (cuda_embedding.cuh), the position embedding's one thread per column adds its B rows in order.
// A bad token records its flat index for the next host wait and adds nothing.
#include <cstdint>

#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_elements.cuh"
#include "ops/cuda/cuda_embedding.cuh"
#include "ops/cuda/cuda_kernels.hpp"
#include "ops/cuda/cuda_reduce_block.cuh"

namespace zl::cuda {

namespace {

constexpr int kThreads = 256;

// x[n, c] = wte[token, c] + wpe[t, c], the tables in fp32 or bf16 (widened, then one float add).
template <class Table>
__global__ void embedding_forward_kernel(const std::int64_t* tokens, const Table* wte,
                                         const Table* wpe, float* x, std::int64_t rows,
                                         std::int64_t seq_len, std::int64_t channels,
                                         std::int64_t vocab, unsigned long long* bad_index) {
  for (std::int64_t i = global_index(); i < rows * channels; i += global_stride()) {
    const std::int64_t n = i / channels, c = i % channels;
    const std::int64_t token = tokens[n];
    if (token < 0 || token >= vocab) {
      atomicMin(bad_index, static_cast<unsigned long long>(n));
      continue;
    }
    x[i] = get(wte + token * channels + c) + get(wpe + (n % seq_len) * channels + c);
  }
}

__global__ void check_tokens_kernel(const std::int64_t* tokens, std::int64_t rows,
                                    std::int64_t vocab, unsigned long long* bad_index) {
  for (std::int64_t n = global_index(); n < rows; n += global_stride()) {
    if (tokens[n] < 0 || tokens[n] >= vocab)
      atomicMin(bad_index, static_cast<unsigned long long>(n));
  }
}

// dwpe [T, C]: one thread per (t, c) adds the B rows of position t in order b = 0...
__global__ void embedding_backward_positions_kernel(const std::int64_t* tokens, const float* dx,
                                                    float* dwpe, std::int64_t batch,
                                                    std::int64_t seq_len, std::int64_t channels,
                                                    std::int64_t vocab) {
  for (std::int64_t i = global_index(); i < seq_len * channels; i += global_stride()) {
    const std::int64_t t = i / channels, c = i % channels;
    for (std::int64_t b = 0; b < batch; ++b) {
      const std::int64_t n = b * seq_len + t;
      if (tokens[n] < 0 || tokens[n] >= vocab) continue;
      dwpe[i] += dx[n * channels + c];
    }
  }
}

template <class Table>
void launch_embedding_forward(const std::int64_t* tokens, const Table* wte, const Table* wpe,
                              float* x, std::int64_t batch, std::int64_t seq_len,
                              std::int64_t channels, std::int64_t vocab,
                              unsigned long long* bad_index, cudaStream_t stream) {
  const std::int64_t rows = batch * seq_len;
  if (rows * channels == 0) return;
  embedding_forward_kernel<<<grid_for(rows * channels, kThreads), kThreads, 0, stream>>>(
      tokens, wte, wpe, x, rows, seq_len, channels, vocab, bad_index);
  cuda_check_launch("embedding_forward");
}

}  // namespace

void embedding_forward(const std::int64_t* tokens, const float* wte, const float* wpe, float* x,
                       std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                       std::int64_t vocab, unsigned long long* bad_index, cudaStream_t stream) {
  launch_embedding_forward(tokens, wte, wpe, x, batch, seq_len, channels, vocab, bad_index, stream);
}

template <class H>
void embedding_forward(const std::int64_t* tokens, const H* wte, const H* wpe, float* x,
                       std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                       std::int64_t vocab, unsigned long long* bad_index, cudaStream_t stream) {
  launch_embedding_forward(tokens, wte, wpe, x, batch, seq_len, channels, vocab, bad_index, stream);
}
template void embedding_forward(const std::int64_t*, const std::uint16_t*, const std::uint16_t*,
                                float*, std::int64_t, std::int64_t, std::int64_t, std::int64_t,
                                unsigned long long*, cudaStream_t);
template void embedding_forward(const std::int64_t*, const Fp16*, const Fp16*, float*, std::int64_t,
                                std::int64_t, std::int64_t, std::int64_t, unsigned long long*,
                                cudaStream_t);

void embedding_backward(const std::int64_t* tokens, const float* dx, float* dwte, float* dwpe,
                        std::int32_t* links, std::int64_t batch, std::int64_t seq_len,
                        std::int64_t channels, std::int64_t vocab, unsigned long long* bad_index,
                        cudaStream_t stream) {
  const std::int64_t rows = batch * seq_len;
  if (rows == 0 || channels == 0) return;
  check_tokens_kernel<<<grid_for(rows, kThreads), kThreads, 0, stream>>>(tokens, rows, vocab,
                                                                         bad_index);
  cuda_check_launch("embedding_backward (token check)");
  std::int32_t* next = links;
  std::int32_t* first = links + rows;
  embedding::link_kernel<<<embedding::link_blocks(rows), embedding::kLinkThreads,
                           embedding::kLinkSharedBytes, stream>>>(tokens, rows, vocab, next, first);
  cuda_check_launch("embedding_backward (token links)");
  embedding::add_rows_kernel<<<static_cast<unsigned>(rows), embedding::kRowThreads, 0, stream>>>(
      tokens, dx, next, first, dwte, channels);
  cuda_check_launch("embedding_backward (token rows)");
  embedding_backward_positions_kernel<<<grid_for(seq_len * channels, kThreads), kThreads, 0,
                                        stream>>>(tokens, dx, dwpe, batch, seq_len, channels,
                                                  vocab);
  cuda_check_launch("embedding_backward (position rows)");
}

}  // namespace zl::cuda
