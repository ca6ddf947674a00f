// attention_cases.hpp — what the attention tests of the CUDA kernels share, emulated and on a GPU:
// a shape and its test name, uniform inputs, CpuDevice's forward and backward as the answer, and
// the relative error that the fast kernels' tolerance compares.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "ops/cpu/cpu_device.hpp"

namespace zl::test {

/// A causal attention call: batch sequences of seq_len rows, channels split into heads.
struct AttentionShape {
  std::int64_t batch, seq_len, channels, heads;
};

inline void PrintTo(const AttentionShape& s, std::ostream* out) {
  *out << "B " << s.batch << ", T " << s.seq_len << ", C " << s.channels << ", heads " << s.heads;
}

/// "B2_T5_C8_H2": a parameterized test's name for `s`.
inline std::string attention_shape_name(const AttentionShape& s) {
  std::string name = "B";
  name.append(std::to_string(s.batch)).append("_T").append(std::to_string(s.seq_len));
  name.append("_C").append(std::to_string(s.channels)).append("_H");
  return name.append(std::to_string(s.heads));
}

/// `count` floats uniform in [-2, 2) from `seed`.
inline std::vector<float> uniform_floats(std::size_t count, unsigned seed) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<float> values(count);
  for (float& value : values) value = uniform(generator);
  return values;
}

/// What forward and backward write: stats [B, heads, T, 2], out [B, T, C], dqkv [B, T, 3C].
struct AttentionResult {
  std::vector<float> stats, out, dqkv;
};

inline std::size_t attention_stats_floats(const AttentionShape& s) {
  return static_cast<std::size_t>(s.batch * s.heads * s.seq_len * kAttentionStatsPerRow);
}

/// CpuDevice's attention forward on qkv [B, T, 3C], then its backward from dout [B, T, C].
inline AttentionResult cpu_attention(const AttentionShape& s, const std::vector<float>& qkv,
                                     const std::vector<float>& dout) {
  CpuDevice cpu;
  AttentionResult a{std::vector<float>(attention_stats_floats(s)),
                    std::vector<float>(dout.size()), std::vector<float>(qkv.size())};
  cpu.attention_forward(qkv, a.stats, a.out, s.batch, s.seq_len, s.channels, s.heads);
  cpu.attention_backward(qkv, a.stats, a.out, dout, a.dqkv, s.batch, s.seq_len, s.channels,
                         s.heads);
  return a;
}

/// ||got - want|| / ||want|| over every `stride`-th run of `width` values from `first` (with the
/// defaults, the whole tensor; with first = part * C, width C and stride 3C, the q, k or v part of
/// a [B, T, 3C] tensor); infinity if one of them is NaN.
inline double relative_error(const std::vector<float>& got, const std::vector<float>& want,
                             std::size_t first = 0, std::size_t width = 1,
                             std::size_t stride = 1) {
  double diff = 0.0, norm = 0.0;
  for (std::size_t row = first; row < want.size(); row += stride) {
    for (std::size_t i = row; i < row + width; ++i) {
      if (std::isnan(got[i])) return INFINITY;
      diff += (static_cast<double>(got[i]) - want[i]) * (static_cast<double>(got[i]) - want[i]);
      norm += static_cast<double>(want[i]) * want[i];
    }
  }
  return std::sqrt(diff / norm);
}

}  // namespace zl::test
