// embedding_emulated_test.cpp — the CUDA device's token embedding gradient
// (src/ops/cuda/cuda_embedding.cuh), run on the CPU by the emulator in include/, gives CpuDevice's
// bits: each token's rows added in the order b = 0.., t = 0.., through the links the first kernel
// writes. Tokens repeat often (a small vocabulary), some rows are bad (skipped), the rows span
// several link tiles, and dwte starts non-zero (the gradient accumulates over micro-batches).
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "ops/cpu/cpu_device.hpp"
#include "ops/cuda/cuda_embedding.cuh"
#include "support/same_bits.hpp"

namespace zl {
namespace {

using cuda_emulation::emulate;
namespace emb = cuda::embedding;

TEST(EmbeddingEmulated, TokenRowsAddInTheCpusOrder) {
  constexpr std::int64_t kBatch = 2, kSeqLen = 150, kChannels = 20, kVocab = 37;
  constexpr std::int64_t kRows = kBatch * kSeqLen;  // 300: two link tiles, the second partial
  std::mt19937 engine(7);
  std::uniform_int_distribution<std::int64_t> token(0, kVocab - 1);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::int64_t> tokens(kRows);
  for (auto& t : tokens) t = token(engine);
  tokens[5] = -1;  // bad rows: the CUDA kernels skip them (the launcher's check reports them)
  tokens[290] = kVocab;
  std::vector<float> dx(kRows * kChannels), dwte(kVocab * kChannels);
  for (float& v : dx) v = normal(engine);
  for (float& v : dwte) v = normal(engine);

  std::vector<std::int32_t> next(kRows, 7), first(kRows, 7);
  emulate(emb::link_kernel, dim3(emb::link_blocks(kRows)), dim3(emb::kLinkThreads),
          emb::kLinkSharedBytes)(tokens.data(), kRows, kVocab, next.data(), first.data());
  std::vector<float> gpu = dwte;
  emulate(emb::add_rows_kernel, dim3(kRows), dim3(emb::kRowThreads), 0)(
      tokens.data(), dx.data(), next.data(), first.data(), gpu.data(), kChannels);

  // The CPU device on the good rows (it refuses a bad token): bad rows' dx zeroed adds nothing
  // to any other token, so they are given token 0 with zero dx.
  std::vector<std::int64_t> good_tokens = tokens;
  std::vector<float> good_dx = dx;
  for (std::int64_t n : {5, 290}) {
    good_tokens[n] = 0;
    for (std::int64_t c = 0; c < kChannels; ++c) good_dx[n * kChannels + c] = 0.0f;
  }
  std::vector<float> cpu = dwte, dwpe(kSeqLen * kChannels, 0.0f);
  CpuDevice device;
  device.embedding_backward(good_tokens, good_dx, cpu, dwpe, kBatch, kSeqLen, kChannels, kVocab);
  test::expect_same_bits(gpu, cpu, "dwte");
  // Every good row is linked into its token's chain exactly once, from its token's first row.
  std::vector<int> visits(kRows, 0);
  for (std::int64_t n = 0; n < kRows; ++n) {
    if (first[n] == 0) continue;
    for (std::int64_t m = n; m >= 0; m = next[m]) ++visits[m];
  }
  for (std::int64_t n = 0; n < kRows; ++n) EXPECT_EQ(visits[n], n == 5 || n == 290 ? 0 : 1) << n;
}

}  // namespace
}  // namespace zl
