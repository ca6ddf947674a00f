// cuda_tiled_attention.cuh — the device code of causal multi-head attention in tiles, as flash
// attention computes it (private to src/ops/cuda; cuda_tiled_attention.cu launches it, and
// tests/cuda_emulation runs the same kernels on the CPU). No T x T tensor exists, not even in
// scratch, so memory grows with T. A block of 4 warps takes 32 query rows (or, in backward's
// dk/dv kernel, 32 keys) of one (batch element, head) and walks the other side's rows 32 at a
// time through shared memory, each lane owning one row of the tile; a warp works on 8 of the
// block's rows.
//
// Forward keeps a running max and sum of exponentials per query row (online softmax) and writes
// out and each row's stats {m, l}, the Device contract. Backward rebuilds the probabilities from
// the stats in two kernels, so nothing is added by atomics: the first, per query tile, takes
// delta_t = dout_t . out_t (as flash attention 2 does) and sums dq; the second, per key tile,
// sums dk and dv.
//
// A warp's 8 rows go together: each lane computes its key's (or query's) dot products with all 8
// rows, so one load of the lane's column serves 8 fused multiply-adds, and the weights of the
// weighted sums (the exponentials, p, ds) go through shared memory, read 4 at a time.
//
// Every sum runs in a fixed order (over d in order, over keys tile by tile, lanes by the fixed
// shuffle tree of warp_sum), so a result repeats bit for bit run to run. A score is computed the
// same way in all three kernels (fused multiply-adds over d from 0, times the scale), so backward
// rebuilds exactly forward's scores. fp32 throughout, with no library math: the exponential,
// the probability and the running max are ops/attention_tile.hpp's, and the CPU device
// (cpu_attention.cpp) does the same operations in the same order, so for finite inputs the two
// devices give the same bits (tests/cuda_emulation and tests/gpu compare them bit for bit).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ops/attention_tile.hpp"
#include "ops/cuda/cuda_reduce_block.cuh"

/// ZL_DYNAMIC_SHARED_FLOATS(name) declares `name`, the block's dynamic shared memory as floats (an
/// emulator that runs these kernels on the CPU defines it first).
#ifndef ZL_DYNAMIC_SHARED_FLOATS
#define ZL_DYNAMIC_SHARED_FLOATS(name) extern __shared__ float name[]
#endif

namespace zl::cuda::tiled_attention {

inline constexpr int kTile = attention_tile::kTile;  // rows of a tile: one per lane
static_assert(kTile == kWarpThreads, "a lane per row of a tile");
inline constexpr int kWarps = 4;                     // warps per block
inline constexpr int kRowsPerWarp = kTile / kWarps;  // a warp's rows of the block's tile
inline constexpr int kPad = kTile + 1;               // row stride of a transposed tile [D, kPad]
inline constexpr unsigned kAllLanes = 0xFFFFFFFFu;

// The (batch element, head) a block works on (blockIdx.x = b * heads + h) and the calling thread's
// lane and warp: the head's row t is at qkv + qkv_offset + t * 3C (q; k at + C, v at + 2C) and at
// channels_offset + t * C in [B, T, C] tensors (out, dout).
struct BlockPlace {
  std::int64_t bh;  // b * heads + h: the head's rows of stats and delta, [B * heads, T]
  std::int64_t qkv_offset;
  std::int64_t channels_offset;
  int lane, warp;
};

__device__ inline BlockPlace block_place(std::int64_t T, std::int64_t C, int D,
                                         std::int64_t heads) {
  const std::int64_t bh = blockIdx.x, b = bh / heads, h = bh % heads;
  const int thread = static_cast<int>(threadIdx.x);
  return {bh, b * T * 3 * C + h * D, b * T * C + h * D, thread % kWarpThreads,
          thread / kWarpThreads};
}

// tile[i * D + d] = rows[(t0 + i) * stride + d] for the tile's kTile rows (0 past T): warp w
// copies rows w, w + 4, ..., its lanes a row's channels side by side (coalesced reads, no
// division by D).
__device__ inline void load_rows(float* tile, const float* rows, std::int64_t stride,
                                 std::int64_t t0, std::int64_t T, int D) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  for (int i = static_cast<int>(threadIdx.x) / kWarpThreads; i < kTile; i += kWarps) {
    const bool inside = t0 + i < T;
    const float* row = inside ? rows + (t0 + i) * stride : rows;  // read only when inside
    for (int d = lane; d < D; d += kWarpThreads) tile[i * D + d] = inside ? row[d] : 0.0f;
  }
}

// tile_t[d * kPad + i] = rows[(t0 + i) * stride + d]: the tile transposed, each row padded by one
// float so that lane i reading column i, or lane d reading row d, hits 32 different banks. The
// same warps and lanes as load_rows.
__device__ inline void load_transposed(float* tile_t, const float* rows, std::int64_t stride,
                                       std::int64_t t0, std::int64_t T, int D) {
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  for (int i = static_cast<int>(threadIdx.x) / kWarpThreads; i < kTile; i += kWarps) {
    const bool inside = t0 + i < T;
    const float* row = inside ? rows + (t0 + i) * stride : rows;  // read only when inside
    for (int d = lane; d < D; d += kWarpThreads) tile_t[d * kPad + i] = inside ? row[d] : 0.0f;
  }
}

// The key tile from key s0 into k_t and v_t (transposed), between two barriers: the block's warps
// are done with the previous tile (and the weights they made from it) before it is overwritten,
// and the whole tile is in before any warp reads it.
__device__ inline void load_key_tile(float* k_t, float* v_t, const float* q_rows, std::int64_t C,
                                     std::int64_t s0, std::int64_t T, int D) {
  __syncthreads();
  load_transposed(k_t, q_rows + C, 3 * C, s0, T, D);
  load_transposed(v_t, q_rows + 2 * C, 3 * C, s0, T, D);
  __syncthreads();
}

// z[r] = sum_d rows[r * D + d] * tile_t[d * kPad + lane] for the warp's kRowsPerWarp rows: each
// the dot product of a row with the lane's row of a transposed tile, one fused multiply-add per
// d, d = 0, 1, ... in order. The rows share each load of tile_t, and when D is a multiple of 4 a
// row's 4 channels come in one 16-byte load (a broadcast: every lane reads the same row). fma is
// exact before its one rounding, so the order of its two factors does not matter: q . k and
// k . q give the same bits.
__device__ inline void dot_rows(float (&z)[kRowsPerWarp], const float* rows, const float* tile_t,
                                int lane, int D) {
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) z[r] = 0.0f;
  int d = 0;
  if (D % 4 == 0) {
    for (; d < D; d += 4) {
      const float k0 = tile_t[d * kPad + lane], k1 = tile_t[(d + 1) * kPad + lane];
      const float k2 = tile_t[(d + 2) * kPad + lane], k3 = tile_t[(d + 3) * kPad + lane];
#pragma unroll
      for (int r = 0; r < kRowsPerWarp; ++r) {
        const float4 row = *reinterpret_cast<const float4*>(rows + r * D + d);
        z[r] = fmaf(row.x, k0, z[r]);
        z[r] = fmaf(row.y, k1, z[r]);
        z[r] = fmaf(row.z, k2, z[r]);
        z[r] = fmaf(row.w, k3, z[r]);
      }
    }
  }
  for (; d < D; ++d) {
    const float k = tile_t[d * kPad + lane];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) z[r] = fmaf(rows[r * D + d], k, z[r]);
  }
}

// Component c (0 to 3, a constant once unrolled) of a float4.
__device__ inline float component(const float4& v, int c) {
  return c == 0 ? v.x : c == 1 ? v.y : c == 2 ? v.z : v.w;
}

// acc[r][x] += sum_j weights[r * kTile + j] * tile_t[d * kPad + j] for the warp's rows r and the
// lane's channels d = lane + 32 x < D, j = 0, 1, ... in order. `weights` is the warp's
// [kRowsPerWarp, kTile] in shared memory (row r's weight of key or query j), read 4 at a time
// by every lane alike; each load of tile_t serves all the rows.
template <int kDPerLane>
__device__ inline void add_weighted_columns(float (&acc)[kRowsPerWarp][kDPerLane],
                                            const float* weights, const float* tile_t, int lane,
                                            int D) {
  for (int j = 0; j < kTile; j += 4) {
    float4 w[kRowsPerWarp];
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r)
      w[r] = *reinterpret_cast<const float4*>(weights + r * kTile + j);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
#pragma unroll
      for (int x = 0; x < kDPerLane; ++x) {
        const int d = lane + x * kWarpThreads;
        if (d >= D) continue;
        const float column = tile_t[d * kPad + j + c];
#pragma unroll
        for (int r = 0; r < kRowsPerWarp; ++r)
          acc[r][x] = fmaf(component(w[r], c), column, acc[r][x]);
      }
    }
  }
}

using attention_tile::exp_float;
using attention_tile::probability;
using attention_tile::running_max;

// The shared memory each kernel puts after its tiles: a warp's [kRowsPerWarp, kTile] weights,
// starting at a multiple of 4 floats (16 bytes) for add_weighted_columns's float4 loads.
inline constexpr int kWeightsFloats = kWarps * kRowsPerWarp * kTile;
ZL_HOST_DEVICE constexpr int aligned_floats(int floats) {
  return (floats + 3) / 4 * 4;
}

// One block per (batch element, head) and tile of 32 query rows, the tiles with most keys first.
// Shared memory: q [kTile, D], k transposed [D, kPad], v transposed [D, kPad], and each warp's
// exponentials [kRowsPerWarp, kTile].
template <int kDPerLane>
__global__ void __launch_bounds__(kWarps* kWarpThreads)
    forward_kernel(const float* qkv, float* stats, float* out, std::int64_t T, std::int64_t C,
                   int D, std::int64_t heads, float scale, int tiles) {
  ZL_DYNAMIC_SHARED_FLOATS(shared);
  float* q_tile = shared;
  float* k_t = q_tile + kTile * D;
  float* v_t = k_t + D * kPad;
  const BlockPlace at = block_place(T, C, D, heads);
  const std::int64_t bh = at.bh;
  const int lane = at.lane, warp = at.warp;
  float* weights = shared + aligned_floats(kTile * D + 2 * D * kPad) + warp * kRowsPerWarp * kTile;
  const float* q_rows = qkv + at.qkv_offset;
  const int query_tile = tiles - 1 - static_cast<int>(blockIdx.y);
  const std::int64_t t0 = static_cast<std::int64_t>(query_tile) * kTile;
  const std::int64_t warp_t0 = t0 + warp * kRowsPerWarp;
  load_rows(q_tile, q_rows, 3 * C, t0, T, D);
  float m[kRowsPerWarp], l[kRowsPerWarp], o[kRowsPerWarp][kDPerLane];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.0f;
#pragma unroll
    for (int x = 0; x < kDPerLane; ++x) o[r][x] = 0.0f;
  }
  for (int key_tile = 0; key_tile <= query_tile; ++key_tile) {
    const std::int64_t s0 = static_cast<std::int64_t>(key_tile) * kTile, s = s0 + lane;
    load_key_tile(k_t, v_t, q_rows, C, s0, T, D);
    float z[kRowsPerWarp];
    dot_rows(z, q_tile + warp * kRowsPerWarp * D, k_t, lane, D);
    // Rows past T (zeros in q_tile) are computed too, all finite, and never written.
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const bool causal = s <= warp_t0 + r;
      const float score = causal ? z[r] * scale : -INFINITY;
      const float m_new = running_max(m[r], warp_max(score));  // lane 0's key s0 <= t: finite
      const float e = causal ? exp_float(score - m_new) : 0.0f;
      const float rescale = exp_float(m[r] - m_new);  // 0 on the first tile, where m is -inf
      l[r] = l[r] * rescale + warp_sum(e);
#pragma unroll
      for (int x = 0; x < kDPerLane; ++x) o[r][x] *= rescale;
      m[r] = m_new;
      weights[r * kTile + lane] = e;
    }
    __syncwarp();  // the warp's exponentials are in shared memory
    add_weighted_columns<kDPerLane>(o, weights, v_t, lane, D);
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const std::int64_t t = warp_t0 + r;
    if (t >= T) continue;
    float* o_row = out + at.channels_offset + t * C;
#pragma unroll
    for (int x = 0; x < kDPerLane; ++x) {
      const int d = lane + x * kWarpThreads;
      if (d < D) o_row[d] = o[r][x] / l[r];
    }
    if (lane == 0) {
      stats[(bh * T + t) * 2] = m[r];
      stats[(bh * T + t) * 2 + 1] = l[r];
    }
  }
}

// One block per (batch element, head) and tile of 32 query rows: delta_t = dout_t . out_t (lane
// by lane over the channels d = lane + 32 x in x order, then the warp's sum), then, over the
// row's keys, dq_t = scale * sum_s p_ts (dp_ts - delta_t) k_s with dp_ts = dout_t . v_s. Writes
// dq and delta [B * heads, T] for dkv_kernel. Shared memory: q [kTile, D], dout [kTile, D], k
// and v transposed [D, kPad] each, and each warp's weights [kRowsPerWarp, kTile].
template <int kDPerLane>
__global__ void __launch_bounds__(kWarps* kWarpThreads)
    dq_kernel(const float* qkv, const float* stats, const float* out, const float* dout,
              float* dqkv, float* delta, std::int64_t T, std::int64_t C, int D, std::int64_t heads,
              float scale, int tiles) {
  ZL_DYNAMIC_SHARED_FLOATS(shared);
  float* q_tile = shared;
  float* do_tile = q_tile + kTile * D;
  float* k_t = do_tile + kTile * D;
  float* v_t = k_t + D * kPad;
  const BlockPlace at = block_place(T, C, D, heads);
  const std::int64_t bh = at.bh;
  const int lane = at.lane, warp = at.warp;
  float* weights =
      shared + aligned_floats(2 * kTile * D + 2 * D * kPad) + warp * kRowsPerWarp * kTile;
  const float* q_rows = qkv + at.qkv_offset;
  const int query_tile = tiles - 1 - static_cast<int>(blockIdx.y);
  const std::int64_t t0 = static_cast<std::int64_t>(query_tile) * kTile;
  const std::int64_t warp_t0 = t0 + warp * kRowsPerWarp;
  const float* dout_rows = dout + at.channels_offset;
  load_rows(q_tile, q_rows, 3 * C, t0, T, D);
  load_rows(do_tile, dout_rows, C, t0, T, D);
  float m[kRowsPerWarp], l[kRowsPerWarp], row_delta[kRowsPerWarp], acc[kRowsPerWarp][kDPerLane];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const std::int64_t t = warp_t0 + r;
    m[r] = t < T ? stats[(bh * T + t) * 2] : 0.0f;
    l[r] = t < T ? stats[(bh * T + t) * 2 + 1] : 1.0f;
    float part = 0.0f;  // the lane's part of delta_t
#pragma unroll
    for (int x = 0; x < kDPerLane; ++x) {
      const int d = lane + x * kWarpThreads;
      if (t < T && d < D)
        part = fmaf(dout_rows[t * C + d], out[at.channels_offset + t * C + d], part);
    }
    row_delta[r] = warp_sum(part);
#pragma unroll
    for (int x = 0; x < kDPerLane; ++x) acc[r][x] = 0.0f;
  }
  for (int key_tile = 0; key_tile <= query_tile; ++key_tile) {
    const std::int64_t s0 = static_cast<std::int64_t>(key_tile) * kTile, s = s0 + lane;
    load_key_tile(k_t, v_t, q_rows, C, s0, T, D);
    float qk[kRowsPerWarp], dov[kRowsPerWarp];
    dot_rows(qk, q_tile + warp * kRowsPerWarp * D, k_t, lane, D);
    dot_rows(dov, do_tile + warp * kRowsPerWarp * D, v_t, lane, D);
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const bool causal = s <= warp_t0 + r;
      const float p = causal ? probability(qk[r] * scale, m[r], l[r]) : 0.0f;
      const float dp = causal ? dov[r] : 0.0f;
      weights[r * kTile + lane] = p * (dp - row_delta[r]);  // ds_ts
    }
    __syncwarp();
    add_weighted_columns<kDPerLane>(acc, weights, k_t, lane, D);
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const std::int64_t t = warp_t0 + r;
    if (t >= T) continue;
    float* dq_row = dqkv + at.qkv_offset + t * 3 * C;
#pragma unroll
    for (int x = 0; x < kDPerLane; ++x) {
      const int d = lane + x * kWarpThreads;
      if (d < D) dq_row[d] = acc[r][x] * scale;
    }
    if (lane == 0) delta[bh * T + t] = row_delta[r];
  }
}

// One block per (batch element, head) and tile of 32 keys, over the query tiles from the keys'
// own: dv_s = sum_{t >= s} p_ts dout_t and dk_s = scale * sum_{t >= s} p_ts (dp_ts - delta_t) q_t,
// with p, dp and delta exactly as dq_kernel had them. Shared memory: k and v [kTile, D], q and
// dout transposed [D, kPad] each, the query tile's m, l and delta [kTile] each, and each warp's
// two sets of weights (p, and p (dp - delta)) [kRowsPerWarp, kTile].
template <int kDPerLane>
__global__ void __launch_bounds__(kWarps* kWarpThreads)
    dkv_kernel(const float* qkv, const float* stats, const float* dout, const float* delta,
               float* dqkv, std::int64_t T, std::int64_t C, int D, std::int64_t heads, float scale,
               int tiles) {
  ZL_DYNAMIC_SHARED_FLOATS(shared);
  float* k_tile = shared;
  float* v_tile = k_tile + kTile * D;
  float* q_t = v_tile + kTile * D;
  float* do_t = q_t + D * kPad;
  float* m_tile = do_t + D * kPad;
  float* l_tile = m_tile + kTile;
  float* delta_tile = l_tile + kTile;
  const BlockPlace at = block_place(T, C, D, heads);
  const std::int64_t bh = at.bh;
  const int lane = at.lane, warp = at.warp;
  float* p_weights = shared + aligned_floats(2 * kTile * D + 2 * D * kPad + 3 * kTile) +
                     warp * kRowsPerWarp * kTile;
  float* ds_weights = p_weights + kWeightsFloats;
  const float* q_rows = qkv + at.qkv_offset;
  const int key_tile = static_cast<int>(blockIdx.y);  // tile 0 has the most queries: first
  const std::int64_t s0 = static_cast<std::int64_t>(key_tile) * kTile;
  const std::int64_t warp_s0 = s0 + warp * kRowsPerWarp;
  const float* dout_rows = dout + at.channels_offset;
  load_rows(k_tile, q_rows + C, 3 * C, s0, T, D);
  load_rows(v_tile, q_rows + 2 * C, 3 * C, s0, T, D);
  float dk[kRowsPerWarp][kDPerLane], dv[kRowsPerWarp][kDPerLane];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
#pragma unroll
    for (int x = 0; x < kDPerLane; ++x) dk[r][x] = dv[r][x] = 0.0f;
  }
  for (int query_tile = key_tile; query_tile < tiles; ++query_tile) {
    const std::int64_t t0 = static_cast<std::int64_t>(query_tile) * kTile, t = t0 + lane;
    __syncthreads();
    load_transposed(q_t, q_rows, 3 * C, t0, T, D);
    load_transposed(do_t, dout_rows, C, t0, T, D);
    if (threadIdx.x < kTile) {
      const std::int64_t row = t0 + threadIdx.x;
      m_tile[threadIdx.x] = row < T ? stats[(bh * T + row) * 2] : 0.0f;
      l_tile[threadIdx.x] = row < T ? stats[(bh * T + row) * 2 + 1] : 1.0f;
      delta_tile[threadIdx.x] = row < T ? delta[bh * T + row] : 0.0f;
    }
    __syncthreads();
    float kq[kRowsPerWarp], vdo[kRowsPerWarp];
    dot_rows(kq, k_tile + warp * kRowsPerWarp * D, q_t, lane, D);
    dot_rows(vdo, v_tile + warp * kRowsPerWarp * D, do_t, lane, D);
    // Keys past T (zeros in k_tile and v_tile) are computed too, all finite, and never written.
#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const bool causal = t >= warp_s0 + r && t < T;
      const float p = causal ? probability(kq[r] * scale, m_tile[lane], l_tile[lane]) : 0.0f;
      const float dp = causal ? vdo[r] : 0.0f;
      p_weights[r * kTile + lane] = p;
      ds_weights[r * kTile + lane] = p * (dp - delta_tile[lane]);
    }
    __syncwarp();
    add_weighted_columns<kDPerLane>(dv, p_weights, do_t, lane, D);
    add_weighted_columns<kDPerLane>(dk, ds_weights, q_t, lane, D);
  }
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const std::int64_t s = warp_s0 + r;
    if (s >= T) continue;
    float* dk_row = dqkv + at.qkv_offset + s * 3 * C + C;
#pragma unroll
    for (int x = 0; x < kDPerLane; ++x) {
      const int d = lane + x * kWarpThreads;
      if (d < D) {
        dk_row[d] = dk[r][x] * scale;
        dk_row[C + d] = dv[r][x];
      }
    }
  }
}

/// Calls f.template operator()<kDPerLane>() with the kernels' channels per lane for a head of
/// `head_dim` channels (at most 8 per lane, 256): 1, 2, 4 or 8, the fewest that cover it.
template <class F>
void with_channels_per_lane(std::int64_t head_dim, F&& f) {
  switch ((head_dim + kWarpThreads - 1) / kWarpThreads) {
    case 1:
      return f.template operator()<1>();
    case 2:
      return f.template operator()<2>();
    case 3:
    case 4:
      return f.template operator()<4>();
    default:
      return f.template operator()<8>();
  }
}

/// Bytes of `floats` floats.
inline std::size_t floats_bytes(std::int64_t floats) {
  return static_cast<std::size_t>(floats) * sizeof(float);
}

/// Grid, block and tiles of a launch: x the (batch element, head) pairs, y the 32-row tiles.
struct Launch {
  dim3 grid;   ///< (batch * heads, tiles)
  dim3 block;  ///< 4 warps
  int tiles;   ///< ceil(seq_len / 32)
};

/// The launch of every kernel here for `batch` sequences of `seq_len` rows with `heads` heads.
inline Launch launch_shape(std::int64_t batch, std::int64_t seq_len, std::int64_t heads) {
  const int tiles = static_cast<int>((seq_len + kTile - 1) / kTile);
  return {dim3(static_cast<unsigned>(batch * heads), static_cast<unsigned>(tiles)),
          dim3(kWarps * kWarpThreads), tiles};
}

/// Dynamic shared memory of forward_kernel, dq_kernel and dkv_kernel for head size D.
inline std::size_t forward_shared_bytes(int D) {
  return floats_bytes(aligned_floats(kTile * D + 2 * D * kPad) + kWeightsFloats);
}
inline std::size_t dq_shared_bytes(int D) {
  return floats_bytes(aligned_floats(2 * kTile * D + 2 * D * kPad) + kWeightsFloats);
}
inline std::size_t dkv_shared_bytes(int D) {
  return floats_bytes(aligned_floats(2 * kTile * D + 2 * D * kPad + 3 * kTile) +
                      2 * kWeightsFloats);
}

}  // namespace zl::cuda::tiled_attention
