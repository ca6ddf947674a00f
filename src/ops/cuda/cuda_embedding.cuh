// cuda_embedding.cuh — the device code of the token embedding's gradient (private to src/ops/cuda;
// cuda_embedding.cu launches it, tests/cuda_emulation runs it on the CPU): dwte[token] += the dx
// rows of that token in the order b = 0.., t = 0.., the CPU's order, so the bits are the CPU's,
// with the rows bucketed by token instead of one thread per channel walking all of them.
//
// The first kernel links each row to the next row of the same token (and marks a token's first
// row): every row compares its token with every other row's, in tiles through shared memory, so
// the links need no sort and no atomics. The second gives each first row a block, whose threads
// take the channels and walk the token's rows through the links in order, adding into one float
// per channel, then store it once: a token seen k times costs k adds a channel, in parallel over
// distinct tokens. Rows with a token outside [0, vocab) are skipped (the launcher's check reports
// them). The kernels have internal linkage: each translation unit that launches them has its own.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

/// ZL_DYNAMIC_SHARED_FLOATS(name) declares `name`, the block's dynamic shared memory as floats (an
/// emulator that runs these kernels on the CPU defines it first).
#ifndef ZL_DYNAMIC_SHARED_FLOATS
#define ZL_DYNAMIC_SHARED_FLOATS(name) extern __shared__ float name[]
#endif

namespace zl::cuda::embedding {

inline constexpr int kLinkThreads = 256;  // rows a block of the link kernel takes
inline constexpr int kLinkTile = 256;     // tokens a block compares at a time
inline constexpr int kRowThreads = 256;   // channels a block of the add kernel takes at a time

/// Grid of the link kernel for `rows` rows, and its dynamic shared bytes (one tile of tokens).
inline unsigned link_blocks(std::int64_t rows) {
  return static_cast<unsigned>((rows + kLinkThreads - 1) / kLinkThreads);
}
inline constexpr std::size_t kLinkSharedBytes = kLinkTile * sizeof(std::int64_t);

/// next[n] = the smallest m > n with tokens[m] == tokens[n], or -1; first[n] = 1 when no m < n
/// has that token (else 0). Rows with a bad token are linked to nothing and never first.
static __global__ void link_kernel(const std::int64_t* tokens, std::int64_t rows,
                                   std::int64_t vocab, std::int32_t* next, std::int32_t* first) {
  ZL_DYNAMIC_SHARED_FLOATS(shared);
  auto* tile = reinterpret_cast<std::int64_t*>(shared);  // [kLinkTile]
  const std::int64_t n = static_cast<std::int64_t>(blockIdx.x) * kLinkThreads + threadIdx.x;
  const std::int64_t token = n < rows ? tokens[n] : -1;
  const bool valid = token >= 0 && token < vocab;
  std::int64_t after = -1;
  bool seen_before = false;
  for (std::int64_t m0 = 0; m0 < rows; m0 += kLinkTile) {
    __syncthreads();  // every thread is done with the previous tile
    for (std::int64_t i = threadIdx.x; i < kLinkTile; i += kLinkThreads) {
      tile[i] = m0 + i < rows ? tokens[m0 + i] : -1;
    }
    __syncthreads();
    for (int i = 0; i < kLinkTile && m0 + i < rows; ++i) {
      if (!valid || tile[i] != token) continue;
      const std::int64_t m = m0 + i;
      if (m < n) seen_before = true;
      if (m > n && after < 0) after = m;
    }
  }
  if (n < rows) {
    next[n] = valid ? static_cast<std::int32_t>(after) : -1;
    first[n] = valid && !seen_before ? 1 : 0;
  }
}

/// One block per row n: if it is its token's first row, dwte[token, c] += dx[m, c] for the
/// token's rows m in order (n, next[n], ...), for every channel c.
static __global__ void add_rows_kernel(const std::int64_t* tokens, const float* dx,
                                       const std::int32_t* next, const std::int32_t* first,
                                       float* dwte, std::int64_t channels) {
  const std::int64_t n = blockIdx.x;
  if (first[n] == 0) return;
  float* row = dwte + tokens[n] * channels;
  for (std::int64_t c = threadIdx.x; c < channels; c += kRowThreads) {
    float sum = row[c];
    for (std::int64_t m = n; m >= 0; m = next[m]) sum += dx[m * channels + c];
    row[c] = sum;
  }
}

}  // namespace zl::cuda::embedding
