// cuda_fast_attention_backward.cuh — the fast causal attention's backward (private to
// src/ops/cuda; cuda_fast_attention.cu launches it, tests/cuda_emulation runs it on the CPU): the
// dq kernel, per query tile, then the dk/dv kernel, per key tile, with no atomics. The dq kernel
// also writes each row's delta (dout . out) and lse, and dout in Half, to scratch; the dk/dv kernel
// copies them in with its query tiles. Tiles, stages and products as cuda_fast_attention.cuh's.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ops/cuda/cuda_fast_attention.cuh"

namespace zl::cuda::fast_attention {

/// Backward's device scratch, one block of backward_scratch_bytes: per (batch, head, row) delta
/// and lse (log2 of the row's softmax sum, plus its max in log2 units), then dout in the tiles'
/// format Half [B, T, C], written by the dq kernel and read by the dk/dv kernel.
template <class Half>
struct BackwardScratch {
  float* delta;
  float* lse;
  Half* dout;
};

inline std::size_t backward_rows_bytes(std::int64_t batch, std::int64_t seq_len,
                                       std::int64_t heads) {
  const auto bytes = static_cast<std::size_t>(2 * batch * heads * seq_len) * sizeof(float);
  return (bytes + 15) / 16 * 16;
}

inline std::size_t backward_scratch_bytes(std::int64_t batch, std::int64_t seq_len,
                                          std::int64_t channels, std::int64_t heads) {
  return backward_rows_bytes(batch, seq_len, heads) +
         static_cast<std::size_t>(batch * seq_len * channels) * sizeof(std::uint16_t);
}

/// The parts of `scratch` (16-byte aligned, backward_scratch_bytes long), dout in Half.
template <class Half>
inline BackwardScratch<Half> backward_scratch(void* scratch, std::int64_t batch,
                                              std::int64_t seq_len, std::int64_t heads) {
  static_assert(sizeof(Half) == sizeof(std::uint16_t), "dout's copy is 16 bits an element");
  auto* rows = static_cast<float*>(scratch);
  return {rows, rows + batch * heads * seq_len,
          reinterpret_cast<Half*>(static_cast<char*>(scratch) +
                                  backward_rows_bytes(batch, seq_len, heads))};
}

/// A row's lse from its stats {m, l}: m in log2 units plus log2 l, so that a probability is
/// exp2(score * scale * log2 e - lse) in both backward kernels.
__device__ inline float row_lse(const float* row_stats) {
  return row_stats[0] * kLog2e + log2f(row_stats[1]);
}

/// Backward, per query tile: delta_t = dout_t . out_t and each row's lse into `scratch`, dout in
/// Half into scratch.dout, and dq into dqkv's q columns. Same grid and block as forward;
/// kDqSharedBytes<kD>.
template <int kD, class Elem = float, class Half = typename TilesOf<Elem>::type>
__global__ void __launch_bounds__(kThreads)
    dq_kernel(const Elem* qkv, const float* stats, const Elem* out, const float* dout, float* dqkv,
              BackwardScratch<Half> scratch, std::int64_t T, std::int64_t C, std::int64_t heads,
              float scale, bool async) {
  static_assert(kTakesElem<Elem, Half>, "q, k, v and out are fp32 or in the tiles' format");
  constexpr int kWords = kRowWords<kD>, kTile = kTileWords<kD>;
  ZL_DYNAMIC_SHARED_FLOATS(shared);
  auto* stages = reinterpret_cast<std::uint32_t*>(shared);  // stage s: k at 2 s kTile, then v
  auto* delta_rows = reinterpret_cast<float*>(stages + 4 * kTile);  // [64]
  const Place at = place(T, C, kD, heads, true);
  const Elem* q_rows = qkv + at.qkv_offset;
  const std::int64_t q0 = std::int64_t{at.tile} * kTileRows;
  const int r0 = at.warp * kWarpRows;
  // the tile's q and dout through stage 1 into registers, while stage 0 takes the first key tile
  load_tile<kD, Half>(stages + 2 * kTile, q_rows, 3 * C, q0, T, async);
  load_tile<kD, Half>(stages + 3 * kTile, dout + at.channels_offset, C, q0, T, async,
                      scratch.dout + at.channels_offset, C);
  load_key_tile<kD, Half>(stages, q_rows, C, 0, T, async);
  mma::commit_copies();
  {  // delta_t = dout_t . out_t: two threads a row, each half the channels in order, then the pair
    const int i = static_cast<int>(threadIdx.x) / 2, half = static_cast<int>(threadIdx.x) % 2;
    const std::int64_t t = q0 + i;
    float partial = 0.0f;
    if (t < T) {
      const float* dy_row = dout + at.channels_offset + t * C + half * (kD / 2);
      const Elem* out_row = out + at.channels_offset + t * C + half * (kD / 2);
#pragma unroll
      for (int d = 0; d < kD / 2; ++d) partial = partial + dy_row[d] * element(out_row[d]);
    }
    const float sum = partial + __shfl_xor_sync(0xFFFFFFFFu, partial, 1);
    if (half == 0) {
      delta_rows[i] = sum;
      if (t < T) scratch.delta[at.bh * T + t] = sum;
    }
  }
  mma::wait_copies();
  __syncthreads();
  std::uint32_t q[kD / 16][4], dy[kD / 16][4];
  load_a(q, stages + 2 * kTile, kWords, r0, at);
  load_a(dy, stages + 3 * kTile, kWords, r0, at);

  const std::int64_t query[2] = {q0 + r0 + at.group, q0 + r0 + at.group + 8};
  const float row_delta[2] = {delta_rows[r0 + at.group], delta_rows[r0 + at.group + 8]};
  float lse[2] = {0.0f, 0.0f};
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (query[r] < T) {
      lse[r] = row_lse(stats + 2 * (at.bh * T + query[r]));
      if (at.pair == 0) scratch.lse[at.bh * T + query[r]] = lse[r];
    }
  }
  __syncthreads();  // every warp has its q and dout before stage 1 takes the second key tile
  const float scale_log2 = scale * kLog2e;
  float dq[kD / 8][4];
  zero(dq);
  for (int kt = 0; kt <= at.tile; ++kt) {
    const std::uint32_t* k_tile =
        staged_key_tile<kD, Half>(stages, q_rows, C, kt, at.tile, T, async);
    const std::uint32_t* v_tile = k_tile + kTile;
    float s[kTileColumns][4], dp[kTileColumns][4];
    zero(s);
    zero(dp);
    multiply<kTileColumns, kD / 16, kWords, Half>(s, q, k_tile, at);
    multiply<kTileColumns, kD / 16, kWords, Half>(dp, dy, v_tile, at);
    const bool diagonal = kt == at.tile;
    const std::int64_t s0 = std::int64_t{kt} * kTileRows;
#pragma unroll
    for (int n = 0; n < kTileColumns; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const std::int64_t key = s0 + 8 * n + 2 * at.pair + (e & 1);
        const int r = e / 2;
        const bool seen = !diagonal || key <= query[r];
        const float p = seen ? mma::exp2_approx(fmaf(s[n][e], scale_log2, -lse[r])) : 0.0f;
        s[n][e] = p * (dp[n][e] - row_delta[r]);  // ds
      }
    }
    std::uint32_t ds[kTileChunks][4];
    as_a<Half>(ds, s);
    multiply_transposed<kD / 8, kTileChunks, kWords, Half>(dq, ds, k_tile, at);
    mma::wait_copies();
    __syncthreads();  // the next key tile is in, and every warp is done with this one
  }
  const float factor[2] = {scale, scale};
  store_rows(dqkv + at.qkv_offset, 3 * C, q0, r0, T, dq, factor, at);
}

// Query tile `qt` for the dk/dv kernel into `stage` (q, then dout in Half a tile later) and
// `rows` (its rows' lse, then delta: 64 floats each, 4 bytes a row by cp.async; rows past T as
// zeros).
template <int kD, class Half, class Elem>
__device__ inline void load_query_tile(std::uint32_t* stage, float* rows, const Elem* q_rows,
                                       const BackwardScratch<Half>& scratch, const Place& at,
                                       std::int64_t C, int qt, std::int64_t T, bool async) {
  const std::int64_t q0 = std::int64_t{qt} * kTileRows;
  load_tile<kD, Half>(stage, q_rows, 3 * C, q0, T, async);
  load_tile<kD, Half>(stage + kTileWords<kD>, scratch.dout + at.channels_offset, C, q0, T, true);
  const std::int64_t first = at.bh * T;
  for (int e = static_cast<int>(threadIdx.x); e < 2 * kTileRows; e += kThreads) {
    const int i = e % kTileRows;
    float* to = rows + e;  // lse rows first, then delta rows
    if (q0 + i >= T) {
      *to = 0.0f;
    } else {
      mma::copy4_async(to, (e < kTileRows ? scratch.lse : scratch.delta) + first + q0 + i);
    }
  }
}

/// Backward, per key tile: dk and dv into dqkv's k and v columns, from the delta, lse and Half
/// dout the dq kernel wrote into `scratch`. Grid and block as forward; kDkvSharedBytes<kD>.
template <int kD, class Elem = float, class Half = typename TilesOf<Elem>::type>
__global__ void __launch_bounds__(kThreads)
    dkv_kernel(const Elem* qkv, BackwardScratch<Half> scratch, float* dqkv, std::int64_t T,
               std::int64_t C, std::int64_t heads, float scale, bool async) {
  static_assert(kTakesElem<Elem, Half>, "q, k, v and out are fp32 or in the tiles' format");
  constexpr int kWords = kRowWords<kD>, kTile = kTileWords<kD>;
  ZL_DYNAMIC_SHARED_FLOATS(shared);
  auto* stages = reinterpret_cast<std::uint32_t*>(shared);    // stage s: q at 2 s kTile, then dout
  auto* rows = reinterpret_cast<float*>(stages + 4 * kTile);  // stage s: lse at 2 s 64, then delta
  const Place at = place(T, C, kD, heads, false);
  const Elem* q_rows = qkv + at.qkv_offset;
  const std::int64_t s0 = std::int64_t{at.tile} * kTileRows;
  const int r0 = at.warp * kWarpRows;
  const int tiles = static_cast<int>(gridDim.y);
  // the tile's k and v through stage 1 into registers, while stage 0 takes the first query tile
  load_key_tile<kD, Half>(stages + 2 * kTile, q_rows, C, at.tile, T, async);
  load_query_tile<kD>(stages, rows, q_rows, scratch, at, C, at.tile, T, async);
  mma::commit_copies();
  mma::wait_copies();
  __syncthreads();
  std::uint32_t k[kD / 16][4], v[kD / 16][4];
  load_a(k, stages + 2 * kTile, kWords, r0, at);
  load_a(v, stages + 3 * kTile, kWords, r0, at);
  __syncthreads();  // every warp has its k and v before stage 1 takes the second query tile

  const float scale_log2 = scale * kLog2e;
  const std::int64_t key[2] = {s0 + r0 + at.group, s0 + r0 + at.group + 8};
  float dk[kD / 8][4], dv[kD / 8][4];
  zero(dk);
  zero(dv);
  for (int qt = at.tile; qt < tiles; ++qt) {
    const int stage = (qt - at.tile) % 2;
    const std::uint32_t* q_tile = stages + 2 * stage * kTile;
    const std::uint32_t* dy_tile = q_tile + kTile;
    const float* lse_rows = rows + 2 * stage * kTileRows;
    const float* delta_rows = lse_rows + kTileRows;
    if (qt + 1 < tiles) {  // the next query tile into the other stage, behind this tile's products
      load_query_tile<kD>(stages + 2 * (1 - stage) * kTile, rows + 2 * (1 - stage) * kTileRows,
                          q_rows, scratch, at, C, qt + 1, T, async);
      mma::commit_copies();
    }
    const std::int64_t q0 = std::int64_t{qt} * kTileRows;
    float s[kTileColumns][4], dp[kTileColumns][4];  // transposed: rows keys, columns queries
    zero(s);
    zero(dp);
    multiply<kTileColumns, kD / 16, kWords, Half>(s, k, q_tile, at);
    multiply<kTileColumns, kD / 16, kWords, Half>(dp, v, dy_tile, at);
#pragma unroll
    for (int n = 0; n < kTileColumns; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 8 * n + 2 * at.pair + (e & 1);
        const std::int64_t t = q0 + i;
        const bool seen = qt != at.tile || key[e / 2] <= t;
        const float p = seen ? mma::exp2_approx(fmaf(s[n][e], scale_log2, -lse_rows[i])) : 0.0f;
        s[n][e] = p;
        dp[n][e] = p * (dp[n][e] - delta_rows[i]);  // ds
      }
    }
    std::uint32_t p[kTileChunks][4], ds[kTileChunks][4];
    as_a<Half>(p, s);
    as_a<Half>(ds, dp);
    multiply_transposed<kD / 8, kTileChunks, kWords, Half>(dv, p, dy_tile, at);
    multiply_transposed<kD / 8, kTileChunks, kWords, Half>(dk, ds, q_tile, at);
    mma::wait_copies();
    __syncthreads();  // the next query tile is in, and every warp is done with this one
  }
  const float k_factor[2] = {scale, scale}, v_factor[2] = {1.0f, 1.0f};
  store_rows(dqkv + at.qkv_offset + C, 3 * C, s0, r0, T, dk, k_factor, at);
  store_rows(dqkv + at.qkv_offset + 2 * C, 3 * C, s0, r0, T, dv, v_factor, at);
}

}  // namespace zl::cuda::fast_attention
