// gpu_attention.hpp — a CudaDevice's attention forward and backward on host inputs, for the GPU
// attention tests (tiled_attention_test.cpp, fast_attention_test.cpp): every output starts as NaN,
// so an element no kernel wrote shows.
#pragma once

#include <limits>
#include <vector>

#include "gpu_test_support.hpp"
#include "ops/cuda/cuda_device.hpp"
#include "support/attention_cases.hpp"

namespace zl::test {

/// `gpu`'s attention forward on qkv [B, T, 3C], then its backward from dout [B, T, C] with the
/// stats and out forward wrote.
inline AttentionResult gpu_attention(CudaDevice& gpu, const AttentionShape& s,
                                     const std::vector<float>& qkv,
                                     const std::vector<float>& dout) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Buffer gqkv = upload(gpu, qkv), gdout = upload(gpu, dout);
  Buffer stats = upload(gpu, std::vector<float>(attention_stats_floats(s), nan));
  Buffer out = upload(gpu, std::vector<float>(dout.size(), nan));
  Buffer dqkv = upload(gpu, std::vector<float>(qkv.size(), nan));
  gpu.attention_forward(cspan_of(gqkv), span_of(stats), span_of(out), s.batch, s.seq_len,
                        s.channels, s.heads);
  gpu.attention_backward(cspan_of(gqkv), cspan_of(stats), cspan_of(out), cspan_of(gdout),
                         span_of(dqkv), s.batch, s.seq_len, s.channels, s.heads);
  return {download(gpu, stats), download(gpu, out), download(gpu, dqkv)};
}

}  // namespace zl::test
