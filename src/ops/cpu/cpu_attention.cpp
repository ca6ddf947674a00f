// cpu_attention.cpp — causal multi-head self-attention on the CPU, forward and backward, with the
// CUDA device's tiled kernels' operations in their order (ops/cuda/cuda_tiled_attention.cuh), so
// for finite inputs the two devices give the same bits: keys and queries go by tiles of 32
// (ops/attention_tile.hpp), a score is a chain of fused multiply-adds over the head's channels in
// order times the scale, forward runs an online softmax tile by tile and keeps two floats per
// query row (the largest score m and the sum of exponentials l), and a tile's 32 values are
// summed and maxed in the GPU's shuffle-tree order. Backward rebuilds each probability from q, k
// and the stats: per query row, delta_t = dout_t . out_t (the GPU's lanes, then its warp sum), one
// pass over its keys for p_ts and dp_ts, a second that sums dq_t and adds the row's terms to each
// key's dk and dv (the GPU recomputes them in a kernel per key tile; the sums' order is the same).
// Where the GPU adds a lane that the causal mask or the sequence's end leaves out, so does this
// code, unless the term is a product by zero added to zero. No T x T tensor exists: memory grows
// with T.
//
// Each (batch row, head) is one task for the device's threads; the tasks write disjoint
// elements, so the bits never depend on the thread count. A head's loops are compiled for the
// baseline, AVX2+FMA and AVX-512+FMA (cpu_isa.hpp picks one); with contraction off
// (-ffp-contract=off), explicit fused multiply-adds and no fast-math, every build does the same
// IEEE operations in the same order and gives the same bits.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "ops/attention_tile.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "ops/cpu/cpu_isa.hpp"
#include "ops/cpu/cpu_thread_pool.hpp"

namespace zl {

namespace {

using attention_tile::exp_float;
using attention_tile::kTile;
using attention_tile::probability;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// One (batch row, head): where its rows are in qkv, dout and the outputs, and the task's copies
// of them in the layouts the loops read contiguously, zero past T: rows [Tp, D] and columns
// [D, Tp] (transposed), Tp = T rounded up to whole tiles, as the GPU's tiles load them.
struct Head {
  const float* qkv;  // the sequence's first qkv row, offset to the head (k at + C, v at + 2C)
  std::int64_t T, C, D, Tp;
  float scale;
  // rows[t * D + d] = source row t's element d (row t at source + t * stride), 0 past T.
  void copy_rows(const float* source, std::int64_t stride, std::vector<float>& rows) const {
    rows.assign(static_cast<std::size_t>(Tp * D), 0.0f);
    for (std::int64_t t = 0; t < T; ++t) std::copy_n(source + t * stride, D, rows.data() + t * D);
  }
  // cols[d * Tp + t] = source row t's element d, 0 past T.
  void copy_cols(const float* source, std::int64_t stride, std::vector<float>& cols) const {
    cols.assign(static_cast<std::size_t>(D * Tp), 0.0f);
    for (std::int64_t t = 0; t < T; ++t) {
      for (std::int64_t d = 0; d < D; ++d) cols[d * Tp + t] = source[t * stride + d];
    }
  }
};

// dots[j] = sum_d row[d] * cols[d * Tp + first + j] for the tile's 32 lanes: one fused
// multiply-add per d, d = 0, 1, ... in order (the GPU's dot_rows; the lanes vectorise).
[[gnu::always_inline]] inline void tile_dots(const float* row, const float* cols, std::int64_t D,
                                             std::int64_t Tp, std::int64_t first, float* dots) {
  std::fill(dots, dots + kTile, 0.0f);
  for (std::int64_t d = 0; d < D; ++d) {
    const float x = row[d];
    const float* col = cols + d * Tp + first;
    for (int j = 0; j < kTile; ++j) dots[j] = std::fma(x, col[j], dots[j]);
  }
}

// acc[d] = fma(weights[j], rows[(first + j) * D + d], acc[d]) for j = 0, 1, ..., 31 in order
// (the GPU's add_weighted_columns).
[[gnu::always_inline]] inline void add_weighted_rows(const float* weights, const float* rows,
                                                     std::int64_t D, std::int64_t first,
                                                     float* acc) {
  for (int j = 0; j < kTile; ++j) {
    const float w = weights[j];
    const float* row = rows + (first + j) * D;
    for (std::int64_t d = 0; d < D; ++d) acc[d] = std::fma(w, row[d], acc[d]);
  }
}

// Forward of one head: stats rows [T, 2] and out rows (stride C) of this head.
[[gnu::always_inline]] inline void forward_head(const Head& head, float* stats, float* out) {
  const std::int64_t T = head.T, C = head.C, D = head.D, Tp = head.Tp;
  std::vector<float> k_cols, v_rows, o(static_cast<std::size_t>(D));
  head.copy_cols(head.qkv + C, 3 * C, k_cols);
  head.copy_rows(head.qkv + 2 * C, 3 * C, v_rows);
  float z[kTile], e[kTile], scratch[kTile];
  for (std::int64_t t = 0; t < T; ++t) {
    const float* q = head.qkv + t * 3 * C;
    float m = kNegInf, l = 0.0f;
    std::fill(o.begin(), o.end(), 0.0f);
    for (std::int64_t s0 = 0; s0 <= t; s0 += kTile) {
      tile_dots(q, k_cols.data(), D, Tp, s0, z);
      for (int j = 0; j < kTile; ++j) z[j] = s0 + j <= t ? z[j] * head.scale : kNegInf;
      std::copy_n(z, kTile, scratch);
      const float m_new = attention_tile::running_max(m, attention_tile::tile_max(scratch));
      for (int j = 0; j < kTile; ++j) e[j] = s0 + j <= t ? exp_float(z[j] - m_new) : 0.0f;
      const float rescale = exp_float(m - m_new);  // 0 on the first tile, where m is -inf
      std::copy_n(e, kTile, scratch);
      l = l * rescale + attention_tile::tile_sum(scratch);
      for (float& value : o) value *= rescale;
      add_weighted_rows(e, v_rows.data(), D, s0, o.data());
      m = m_new;
    }
    float* o_row = out + t * C;
    for (std::int64_t d = 0; d < D; ++d) o_row[d] = o[static_cast<std::size_t>(d)] / l;
    stats[t * kAttentionStatsPerRow] = m;
    stats[t * kAttentionStatsPerRow + 1] = l;
  }
}

// Backward of one head: dqkv rows (stride 3C) of this head from its stats rows and its out and
// dout rows (stride C). Query row by query row: delta_t = dout_t . out_t as the GPU's dq kernel
// sums it (lane j adds the channels j, j + 32, ... in order, then the lanes go in the shuffle
// tree's order), the probabilities and dp of its keys, then dq_t and each key's share of dk and dv,
// added in the order the GPU's dk/dv kernel adds them (by query, ascending; a key's terms for
// queries before it are products by zero added to zero, so skipping them changes no bit).
[[gnu::always_inline]] inline void backward_head(const Head& head, const float* stats,
                                                 const float* out, const float* dout, float* dqkv) {
  const std::int64_t T = head.T, C = head.C, D = head.D, Tp = head.Tp;
  std::vector<float> q_rows, k_rows, k_cols, v_cols, dout_rows;
  head.copy_rows(head.qkv, 3 * C, q_rows);
  head.copy_rows(head.qkv + C, 3 * C, k_rows);
  head.copy_cols(head.qkv + C, 3 * C, k_cols);
  head.copy_cols(head.qkv + 2 * C, 3 * C, v_cols);
  head.copy_rows(dout, C, dout_rows);
  const auto head_floats = static_cast<std::size_t>(Tp * D);
  std::vector<float> dk(head_floats, 0.0f), dv(head_floats, 0.0f), dq(static_cast<std::size_t>(D)),
      p(static_cast<std::size_t>(Tp)), dp(static_cast<std::size_t>(Tp));
  float z[kTile], lanes[kTile];
  for (std::int64_t t = 0; t < T; ++t) {
    const float m = stats[t * kAttentionStatsPerRow], l = stats[t * kAttentionStatsPerRow + 1];
    const float* q = q_rows.data() + t * D;
    const float* g = dout_rows.data() + t * D;
    const float* o = out + t * C;
    for (int j = 0; j < kTile; ++j) {  // lane j's part of delta_t
      lanes[j] = 0.0f;
      for (std::int64_t d = j; d < D; d += kTile) lanes[j] = std::fma(g[d], o[d], lanes[j]);
    }
    const float delta_t = attention_tile::tile_sum(lanes);
    for (std::int64_t s0 = 0; s0 <= t; s0 += kTile) {
      float* p_tile = p.data() + s0;
      float* dp_tile = dp.data() + s0;
      tile_dots(q, k_cols.data(), D, Tp, s0, z);
      tile_dots(g, v_cols.data(), D, Tp, s0, dp_tile);
      for (int j = 0; j < kTile; ++j) {
        const bool causal = s0 + j <= t;
        p_tile[j] = causal ? probability(z[j] * head.scale, m, l) : 0.0f;
        dp_tile[j] = causal ? dp_tile[j] : 0.0f;
      }
    }
    std::fill(dq.begin(), dq.end(), 0.0f);
    for (std::int64_t s0 = 0; s0 <= t; s0 += kTile) {
      for (int j = 0; j < kTile; ++j) z[j] = p[s0 + j] * (dp[s0 + j] - delta_t);  // ds
      add_weighted_rows(z, k_rows.data(), D, s0, dq.data());
      for (int j = 0; j < kTile && s0 + j <= t; ++j) {
        float* dk_s = dk.data() + (s0 + j) * D;
        float* dv_s = dv.data() + (s0 + j) * D;
        const float ds = z[j], p_ts = p[s0 + j];
        for (std::int64_t d = 0; d < D; ++d) {
          dk_s[d] = std::fma(ds, q[d], dk_s[d]);
          dv_s[d] = std::fma(p_ts, g[d], dv_s[d]);
        }
      }
    }
    float* dq_out = dqkv + t * 3 * C;
    for (std::int64_t d = 0; d < D; ++d) dq_out[d] = dq[static_cast<std::size_t>(d)] * head.scale;
  }
  // The GPU adds the last tile's lanes past T too: +0 times a zero row, which turns a -0 sum
  // into +0 and leaves every other sum as it is.
  const float past_end = T < Tp ? 0.0f : -0.0f;
  for (std::int64_t s = 0; s < T; ++s) {
    float* dk_out = dqkv + s * 3 * C + C;
    for (std::int64_t d = 0; d < D; ++d) {
      const auto i = static_cast<std::size_t>(s * D + d);
      dk_out[d] = (dk[i] + past_end) * head.scale;
      dk_out[C + d] = dv[i] + past_end;
    }
  }
}

void forward_baseline(const Head& head, float* stats, float* out) {
  forward_head(head, stats, out);
}
void backward_baseline(const Head& head, const float* stats, const float* out, const float* dout,
                       float* dqkv) {
  backward_head(head, stats, out, dout, dqkv);
}
ZL_TARGET_AVX2 void forward_avx2(const Head& head, float* stats, float* out) {
  forward_head(head, stats, out);
}
ZL_TARGET_AVX2 void backward_avx2(const Head& head, const float* stats, const float* out,
                                  const float* dout, float* dqkv) {
  backward_head(head, stats, out, dout, dqkv);
}
ZL_TARGET_AVX512 void forward_avx512(const Head& head, float* stats, float* out) {
  forward_head(head, stats, out);
}
ZL_TARGET_AVX512 void backward_avx512(const Head& head, const float* stats, const float* out,
                                      const float* dout, float* dqkv) {
  backward_head(head, stats, out, dout, dqkv);
}

Head head_of(const float* qkv, std::int64_t b, std::int64_t h, std::int64_t T, std::int64_t C,
             std::int64_t heads) {
  const std::int64_t D = C / heads;  // heads divide C: Device checked
  return Head{.qkv = qkv + b * T * 3 * C + h * D,
              .T = T,
              .C = C,
              .D = D,
              .Tp = (T + kTile - 1) / kTile * kTile,
              .scale = static_cast<float>(attention_scale(D))};
}

}  // namespace

void CpuDevice::do_attention_forward(std::span<const float> qkv, std::span<float> stats,
                                     std::span<float> out, std::int64_t batch, std::int64_t seq_len,
                                     std::int64_t channels, std::int64_t heads) {
  static const auto forward = cpu::widest_of(forward_baseline, forward_avx2, forward_avx512);
  pool().run(batch * heads, [&](std::int64_t task) {
    const std::int64_t b = task / heads, h = task % heads;
    const Head head = head_of(qkv.data(), b, h, seq_len, channels, heads);
    forward(head, stats.data() + task * seq_len * kAttentionStatsPerRow,
            out.data() + b * seq_len * channels + h * head.D);
  });
}

void CpuDevice::do_attention_backward(std::span<const float> qkv, std::span<const float> stats,
                                      std::span<const float> out, std::span<const float> dout,
                                      std::span<float> dqkv, std::int64_t batch,
                                      std::int64_t seq_len, std::int64_t channels,
                                      std::int64_t heads) {
  static const auto backward = cpu::widest_of(backward_baseline, backward_avx2, backward_avx512);
  pool().run(batch * heads, [&](std::int64_t task) {
    const std::int64_t b = task / heads, h = task % heads;
    const Head head = head_of(qkv.data(), b, h, seq_len, channels, heads);
    backward(head, stats.data() + task * seq_len * kAttentionStatsPerRow,
             out.data() + b * seq_len * channels + h * head.D,
             dout.data() + b * seq_len * channels + h * head.D,
             dqkv.data() + b * seq_len * 3 * channels + h * head.D);
  });
}

}  // namespace zl
