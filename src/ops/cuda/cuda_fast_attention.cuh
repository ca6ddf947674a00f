// cuda_fast_attention.cuh — the device code of the fast causal attention (private to
// src/ops/cuda; cuda_fast_attention.cu launches it, tests/cuda_emulation runs it on the CPU):
// flash attention 2's order on the tensor cores. q, k, v and out are read in fp32 or bf16 (the
// kernels' T; out written in it too), dout in fp32; a tile is rounded to bf16 (a bf16 one is
// taken as it is) as it comes into shared memory; every product (scores, p v, dp, dq, dk, dv)
// is a warp's mma.sync with fp32 accumulators (cuda_mma.cuh); the softmax runs in fp32.
//
// A block of 4 warps takes 64 rows of one (batch element, head): forward and the dq kernel 64
// queries, the dk/dv kernel 64 keys, 16 rows a warp (an MMA's rows). It walks the other side 64
// rows at a time through shared memory. Scores stay in registers: a product's accumulators,
// packed to bf16, are the next product's A operand. Forward keeps a running max and sum per query
// row (online softmax) and writes out and each row's stats {m, l}, the Device contract. Backward
// rebuilds the probabilities from the stats in two kernels, with no atomics: the dq kernel, per
// query tile, also writes delta_t = dout_t . out_t (fp32, from dout and out as passed), and the
// dk/dv kernel, per key tile, reads it.
//
// Every sum has a fixed order (an MMA's, then tile after tile; a row's max and sum over the 4
// lanes that hold it by a fixed butterfly), so a result repeats bit for bit run to run; it is
// not the CPU's order or precision (the exact kernels, cuda_tiled_attention.cuh, give those).
// Head sizes 16, 32 and 64 (with_head_dim); any sequence length.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "ops/cuda/cuda_mma.cuh"
#include "ops/cuda/cuda_reduce_block.cuh"

/// ZL_DYNAMIC_SHARED_FLOATS(name) declares `name`, the block's dynamic shared memory as floats (an
/// emulator that runs these kernels on the CPU defines it first).
#ifndef ZL_DYNAMIC_SHARED_FLOATS
#define ZL_DYNAMIC_SHARED_FLOATS(name) extern __shared__ float name[]
#endif

namespace zl::cuda::fast_attention {

inline constexpr int kWarps = 4;
inline constexpr int kThreads = kWarps * kWarpThreads;
inline constexpr int kWarpRows = 16;                  // an MMA's rows: a warp's queries or keys
inline constexpr int kTileRows = kWarps * kWarpRows;  // a block's rows, and each walked tile's
inline constexpr int kTileChunks = kTileRows / 16;    // a tile's rows as an MMA's k (16 each)
inline constexpr int kTileColumns = kTileRows / 8;    // a tile's rows as an MMA's n (8 each)
// Words of a transposed tile's row (its 64 rows as 32 bf16 pairs), padded by 4 so that the 8
// groups of a warp reading one word each hit 32 different banks.
inline constexpr int kTransposedWords = kTileRows / 2 + 4;
inline constexpr float kLog2e = 1.44269504088896341f;

/// Words of a row-major tile's row for head size kD: kD / 2 bf16 pairs, padded by 4.
template <int kD>
inline constexpr int kRowWords = kD / 2 + 4;

/// Whether the kernels take head size `head_dim`: 16, 32 or 64 (an MMA's k is 16, and a warp's
/// dk and dv accumulators for 64 channels fill most of its registers).
inline constexpr bool takes_head_dim(std::int64_t head_dim) {
  return head_dim == 16 || head_dim == 32 || head_dim == 64;
}

/// Calls f.template operator()<kD>() with kD = head_dim when takes_head_dim; false otherwise.
template <class F>
bool with_head_dim(std::int64_t head_dim, F&& f) {
  switch (head_dim) {
    case 16: f.template operator()<16>(); return true;
    case 32: f.template operator()<32>(); return true;
    case 64: f.template operator()<64>(); return true;
    default: return false;
  }
}

// An element of q, k, v or out in fp32: itself, or its bf16 bits widened (exact); and written
// from fp32: itself, or rounded to bf16 (nearest even).
ZL_HOST_DEVICE inline float element(float value) {
  return value;
}
ZL_HOST_DEVICE inline float element(std::uint16_t bits) {
  return mma::unpack_bf16(bits, false);
}
ZL_HOST_DEVICE inline void store_element(float* to, float value) {
  *to = value;
}
ZL_HOST_DEVICE inline void store_element(std::uint16_t* to, float value) {
  *to = static_cast<std::uint16_t>(mma::bf16_bits(value));
}

// Four neighbouring elements in fp32 (one 16-byte load; 8 bytes in bf16).
__device__ inline float4 load4(const float* from) {
  return *reinterpret_cast<const float4*>(from);
}
__device__ inline float4 load4(const std::uint16_t* from) {
  const auto words = *reinterpret_cast<const uint2*>(from);
  return {mma::unpack_bf16(words.x, false), mma::unpack_bf16(words.x, true),
          mma::unpack_bf16(words.y, false), mma::unpack_bf16(words.y, true)};
}

/// Where a block works: blockIdx.x = b * heads + h; blockIdx.y a tile of 64 rows, taken from
/// the last when `last_first` (forward and dq: the last query tiles have the most keys, so they
/// start first) and from the first otherwise (dk/dv).
struct Place {
  std::int64_t bh;               // b * heads + h: the head's rows of stats and delta
  std::int64_t qkv_offset;       // the head's q at qkv + qkv_offset + t * 3C (k + C, v + 2C)
  std::int64_t channels_offset;  // its row t at + t * C in [B, T, C] tensors (out, dout)
  int tile;                      // the block's tile: rows 64 tile .. 64 tile + 63
  int lane, warp, group, pair;   // group = lane / 4 and pair = lane % 4, as cuda_mma.cuh
};

__device__ inline Place place(std::int64_t T, std::int64_t C, int D, std::int64_t heads,
                              bool last_first) {
  const std::int64_t bh = blockIdx.x, b = bh / heads, h = bh % heads;
  const int tiles = static_cast<int>(gridDim.y);
  const int y = static_cast<int>(blockIdx.y);
  const int lane = static_cast<int>(threadIdx.x) % kWarpThreads;
  return {bh,       b * T * 3 * C + h * D, b * T * C + h * D, last_first ? tiles - 1 - y : y,
          lane,     static_cast<int>(threadIdx.x) / kWarpThreads,
          lane / 4, lane % 4};
}

// Rows t0 .. t0 + 63 of `rows` (row t at rows + t * stride, 0 past T) in bf16, read once:
// row-major into `tile` [64][kRowWords] when it is not null, and transposed into `tile_t`
// [kD][kTransposedWords] (row d holds the 64 rows' channel d, two to a word) when it is not null.
// A thread takes two neighbouring rows' 4 channels (16-byte loads, neighbouring threads along a
// row).
template <int kD, class In>
__device__ inline void load_tile(std::uint32_t* tile, std::uint32_t* tile_t, const In* rows,
                                 std::int64_t stride, std::int64_t t0, std::int64_t T) {
  constexpr int kQuads = kD / 4;
  for (int e = static_cast<int>(threadIdx.x); e < kTileRows / 2 * kQuads; e += kThreads) {
    const int pair_row = e / kQuads, d = 4 * (e % kQuads);
    const int i = 2 * pair_row;
    const std::int64_t t = t0 + i;
    float4 a{0.0f, 0.0f, 0.0f, 0.0f}, b{0.0f, 0.0f, 0.0f, 0.0f};
    if (t < T) a = load4(rows + t * stride + d);
    if (t + 1 < T) b = load4(rows + (t + 1) * stride + d);
    if (tile != nullptr) {
      tile[i * kRowWords<kD> + d / 2] = mma::pack_bf16(a.x, a.y);
      tile[i * kRowWords<kD> + d / 2 + 1] = mma::pack_bf16(a.z, a.w);
      tile[(i + 1) * kRowWords<kD> + d / 2] = mma::pack_bf16(b.x, b.y);
      tile[(i + 1) * kRowWords<kD> + d / 2 + 1] = mma::pack_bf16(b.z, b.w);
    }
    if (tile_t != nullptr) {
      tile_t[d * kTransposedWords + pair_row] = mma::pack_bf16(a.x, b.x);
      tile_t[(d + 1) * kTransposedWords + pair_row] = mma::pack_bf16(a.y, b.y);
      tile_t[(d + 2) * kTransposedWords + pair_row] = mma::pack_bf16(a.z, b.z);
      tile_t[(d + 3) * kTransposedWords + pair_row] = mma::pack_bf16(a.w, b.w);
    }
  }
}

// The A operands of the warp's 16 rows r0 .. r0 + 15 of a row-major tile, kChunks chunks of 16
// columns (cuda_mma.cuh's layout).
template <int kChunks>
__device__ inline void load_a(std::uint32_t (&a)[kChunks][4], const std::uint32_t* tile,
                              int words_per_row, int r0, const Place& at) {
  const std::uint32_t* low = tile + (r0 + at.group) * words_per_row + at.pair;
  const std::uint32_t* high = low + 8 * words_per_row;
#pragma unroll
  for (int c = 0; c < kChunks; ++c) {
    a[c][0] = low[8 * c];
    a[c][1] = high[8 * c];
    a[c][2] = low[8 * c + 4];
    a[c][3] = high[8 * c + 4];
  }
}

// acc[n] += a b_n for n < kN: B_n's column j is row 8 n + j of `tile` (a tile whose rows are the
// product's columns and whose words run along k), k over kChunks chunks of 16, in order.
template <int kN, int kChunks>
__device__ inline void multiply(float (&acc)[kN][4], const std::uint32_t (&a)[kChunks][4],
                                const std::uint32_t* tile, int words_per_row, const Place& at) {
#pragma unroll
  for (int n = 0; n < kN; ++n) {
    const std::uint32_t* column = tile + (8 * n + at.group) * words_per_row + at.pair;
#pragma unroll
    for (int c = 0; c < kChunks; ++c) mma::product(acc[n], a[c], column[8 * c], column[8 * c + 4]);
  }
}

// The A operands (kN / 2 chunks of 16 columns) of accumulators acc[kN][4], rounded to bf16.
template <int kN>
__device__ inline void as_a(std::uint32_t (&a)[kN / 2][4], const float (&acc)[kN][4]) {
#pragma unroll
  for (int c = 0; c < kN / 2; ++c) {
    a[c][0] = mma::pack_bf16(acc[2 * c][0], acc[2 * c][1]);
    a[c][1] = mma::pack_bf16(acc[2 * c][2], acc[2 * c][3]);
    a[c][2] = mma::pack_bf16(acc[2 * c + 1][0], acc[2 * c + 1][1]);
    a[c][3] = mma::pack_bf16(acc[2 * c + 1][2], acc[2 * c + 1][3]);
  }
}

template <int kN>
__device__ inline void zero(float (&acc)[kN][4]) {
#pragma unroll
  for (int n = 0; n < kN; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
}

// Over the 4 lanes of a group (the lanes holding one row of an accumulator), by a butterfly:
// every lane of the group gets the same bits.
__device__ inline float group_max(float value) {
  for (int offset = 1; offset < 4; offset *= 2) {
    const float other = __shfl_xor_sync(0xFFFFFFFFu, value, offset);
    value = other > value ? other : value;
  }
  return value;
}
__device__ inline float group_sum(float value) {
  for (int offset = 1; offset < 4; offset *= 2) {
    value += __shfl_xor_sync(0xFFFFFFFFu, value, offset);
  }
  return value;
}

// acc[n] (a warp's 16 rows x 8 n columns) written to rows[t * stride + 8 n + column] times
// `factor[r]` (r: the accumulator's row half), for rows t = t0 + r0 + row below T.
template <int kN, class Out>
__device__ inline void store_rows(Out* rows, std::int64_t stride, std::int64_t t0, int r0,
                                  std::int64_t T, const float (&acc)[kN][4],
                                  const float (&factor)[2], const Place& at) {
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const std::int64_t t = t0 + r0 + at.group + 8 * half;
    if (t >= T) continue;
    Out* row = rows + t * stride + 2 * at.pair;
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      store_element(row + 8 * n, acc[n][2 * half] * factor[half]);
      store_element(row + 8 * n + 1, acc[n][2 * half + 1] * factor[half]);
    }
  }
}

/// Every kernel's grid for `batch` sequences of `seq_len` rows with `heads` heads: (batch * heads,
/// one per tile of 64 rows); kThreads threads a block.
inline dim3 launch_grid(std::int64_t batch, std::int64_t seq_len, std::int64_t heads) {
  return {static_cast<unsigned>(batch * heads),
          static_cast<unsigned>((seq_len + kTileRows - 1) / kTileRows)};
}

/// Dynamic shared memory of each kernel for head size kD.
template <int kD>
inline constexpr std::size_t kForwardSharedBytes =
    sizeof(std::uint32_t) * (2 * kTileRows * kRowWords<kD> + kD * kTransposedWords);
template <int kD>
inline constexpr std::size_t kDqSharedBytes = kForwardSharedBytes<kD>;
template <int kD>
inline constexpr std::size_t kDkvSharedBytes =
    sizeof(std::uint32_t) * (2 * kTileRows * kRowWords<kD> + 2 * kD * kTransposedWords) +
    sizeof(float) * 3 * kTileRows;

/// Forward: out [B, T, C] and stats {m, l} per query row from qkv [B, T, 3C]. Grid (B heads,
/// ceil(T / 64)), kThreads threads, kForwardSharedBytes<kD>.
template <int kD, class Elem = float>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const Elem* qkv, float* stats, Elem* out, std::int64_t T, std::int64_t C,
                   std::int64_t heads, float scale) {
  ZL_DYNAMIC_SHARED_FLOATS(shared);
  auto* q_tile = reinterpret_cast<std::uint32_t*>(shared);  // [64][kRowWords]
  std::uint32_t* k_tile = q_tile + kTileRows * kRowWords<kD>;
  std::uint32_t* v_t = k_tile + kTileRows * kRowWords<kD>;  // [kD][kTransposedWords]
  const Place at = place(T, C, kD, heads, true);
  const Elem* q_rows = qkv + at.qkv_offset;
  const std::int64_t q0 = std::int64_t{at.tile} * kTileRows;
  const int r0 = at.warp * kWarpRows;
  load_tile<kD>(q_tile, nullptr, q_rows, 3 * C, q0, T);
  __syncthreads();
  std::uint32_t q[kD / 16][4];
  load_a(q, q_tile, kRowWords<kD>, r0, at);

  const std::int64_t query[2] = {q0 + r0 + at.group, q0 + r0 + at.group + 8};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
  float o[kD / 8][4];
  zero(o);
  for (int kt = 0; kt <= at.tile; ++kt) {
    const std::int64_t s0 = std::int64_t{kt} * kTileRows;
    __syncthreads();  // every warp is done with the previous key tile
    load_tile<kD>(k_tile, nullptr, q_rows + C, 3 * C, s0, T);
    load_tile<kD>(nullptr, v_t, q_rows + 2 * C, 3 * C, s0, T);
    __syncthreads();
    float s[kTileColumns][4];
    zero(s);
    multiply(s, q, k_tile, kRowWords<kD>, at);
    float row_max[2] = {m[0], m[1]};
#pragma unroll
    for (int n = 0; n < kTileColumns; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const std::int64_t key = s0 + 8 * n + 2 * at.pair + (e & 1);
        const float score = s[n][e] * scale;
        s[n][e] = key <= query[e / 2] && key < T ? score : -INFINITY;
        row_max[e / 2] = s[n][e] > row_max[e / 2] ? s[n][e] : row_max[e / 2];
      }
    }
    // key 0 is in every row's first tile, so the max is finite from then on
    float rescale[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[r] = group_max(row_max[r]);
      rescale[r] = exp2f((m[r] - row_max[r]) * kLog2e);
      m[r] = row_max[r];
      l[r] = l[r] * rescale[r];
    }
#pragma unroll
    for (int n = 0; n < kD / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) o[n][e] = o[n][e] * rescale[e / 2];
    }
#pragma unroll
    for (int n = 0; n < kTileColumns; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        s[n][e] = exp2f((s[n][e] - m[e / 2]) * kLog2e);
        l[e / 2] = l[e / 2] + s[n][e];
      }
    }
    std::uint32_t p[kTileChunks][4];
    as_a(p, s);
    multiply(o, p, v_t, kTransposedWords, at);
  }
  float inverse[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] = group_sum(l[r]);
    inverse[r] = 1.0f / l[r];
    if (at.pair == 0 && query[r] < T) {
      float* row_stats = stats + 2 * (at.bh * T + query[r]);
      row_stats[0] = m[r];
      row_stats[1] = l[r];
    }
  }
  store_rows(out + at.channels_offset, C, q0, r0, T, o, inverse, at);
}

/// Backward, per query tile: delta_t = dout_t . out_t into `delta` [B heads, T], and dq into
/// dqkv's q columns. Same grid, block and shared bytes as forward.
template <int kD, class Elem = float>
__global__ void __launch_bounds__(kThreads)
    dq_kernel(const Elem* qkv, const float* stats, const Elem* out, const float* dout, float* dqkv,
              float* delta, std::int64_t T, std::int64_t C, std::int64_t heads, float scale) {
  ZL_DYNAMIC_SHARED_FLOATS(shared);
  auto* k_tile = reinterpret_cast<std::uint32_t*>(shared);  // [64][kRowWords]
  std::uint32_t* v_tile = k_tile + kTileRows * kRowWords<kD>;
  std::uint32_t* k_t = v_tile + kTileRows * kRowWords<kD>;  // [kD][kTransposedWords]
  const Place at = place(T, C, kD, heads, true);
  const Elem* q_rows = qkv + at.qkv_offset;
  const std::int64_t q0 = std::int64_t{at.tile} * kTileRows;
  const int r0 = at.warp * kWarpRows;
  // the tile's q and dout, through the key buffers, into registers
  load_tile<kD>(k_tile, nullptr, q_rows, 3 * C, q0, T);
  load_tile<kD>(v_tile, nullptr, dout + at.channels_offset, C, q0, T);
  __syncthreads();
  std::uint32_t q[kD / 16][4], dy[kD / 16][4];
  load_a(q, k_tile, kRowWords<kD>, r0, at);
  load_a(dy, v_tile, kRowWords<kD>, r0, at);

  const std::int64_t query[2] = {q0 + r0 + at.group, q0 + r0 + at.group + 8};
  float row_delta[2] = {0.0f, 0.0f}, m[2] = {0.0f, 0.0f}, inverse[2] = {0.0f, 0.0f};
  for (int r = 0; r < kWarpRows; ++r) {
    const std::int64_t t = q0 + r0 + r;
    float partial = 0.0f;
    if (t < T) {
      const float* dy_row = dout + at.channels_offset + t * C;
      const Elem* out_row = out + at.channels_offset + t * C;
      for (int d = at.lane; d < kD; d += kWarpThreads) {
        partial = partial + dy_row[d] * element(out_row[d]);
      }
    }
    const float sum = warp_sum(partial);
    if (t < T && at.lane == 0) delta[at.bh * T + t] = sum;
    if (r == at.group) row_delta[0] = sum;
    if (r == at.group + 8) row_delta[1] = sum;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    if (query[r] < T) {
      const float* row_stats = stats + 2 * (at.bh * T + query[r]);
      m[r] = row_stats[0];
      inverse[r] = 1.0f / row_stats[1];
    }
  }
  float dq[kD / 8][4];
  zero(dq);
  for (int kt = 0; kt <= at.tile; ++kt) {
    const std::int64_t s0 = std::int64_t{kt} * kTileRows;
    __syncthreads();  // every warp is done with the previous key tile (and the first, with q, dout)
    load_tile<kD>(k_tile, k_t, q_rows + C, 3 * C, s0, T);
    load_tile<kD>(v_tile, nullptr, q_rows + 2 * C, 3 * C, s0, T);
    __syncthreads();
    float s[kTileColumns][4], dp[kTileColumns][4];
    zero(s);
    zero(dp);
    multiply(s, q, k_tile, kRowWords<kD>, at);
    multiply(dp, dy, v_tile, kRowWords<kD>, at);
#pragma unroll
    for (int n = 0; n < kTileColumns; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const std::int64_t key = s0 + 8 * n + 2 * at.pair + (e & 1);
        const int r = e / 2;
        const bool seen = key <= query[r] && key < T && query[r] < T;
        const float p = seen ? exp2f((s[n][e] * scale - m[r]) * kLog2e) * inverse[r] : 0.0f;
        s[n][e] = p * (dp[n][e] - row_delta[r]);  // ds
      }
    }
    std::uint32_t ds[kTileChunks][4];
    as_a(ds, s);
    multiply(dq, ds, k_t, kTransposedWords, at);
  }
  const float factor[2] = {scale, scale};
  store_rows(dqkv + at.qkv_offset, 3 * C, q0, r0, T, dq, factor, at);
}

/// Backward, per key tile: dk and dv into dqkv's k and v columns, from the delta dq_kernel wrote.
/// Grid and block as forward; kDkvSharedBytes<kD>.
template <int kD, class Elem = float>
__global__ void __launch_bounds__(kThreads)
    dkv_kernel(const Elem* qkv, const float* stats, const float* dout, const float* delta,
               float* dqkv, std::int64_t T, std::int64_t C, std::int64_t heads, float scale) {
  ZL_DYNAMIC_SHARED_FLOATS(shared);
  auto* q_tile = reinterpret_cast<std::uint32_t*>(shared);  // [64][kRowWords]
  std::uint32_t* dy_tile = q_tile + kTileRows * kRowWords<kD>;
  std::uint32_t* q_t = dy_tile + kTileRows * kRowWords<kD>;  // [kD][kTransposedWords]
  std::uint32_t* dy_t = q_t + kD * kTransposedWords;
  auto* row_m = reinterpret_cast<float*>(dy_t + kD * kTransposedWords);  // [64] each
  float* row_inverse = row_m + kTileRows;
  float* row_delta = row_inverse + kTileRows;
  const Place at = place(T, C, kD, heads, false);
  const Elem* q_rows = qkv + at.qkv_offset;
  const std::int64_t s0 = std::int64_t{at.tile} * kTileRows;
  const int r0 = at.warp * kWarpRows;
  // the tile's k and v, through the query buffers, into registers
  load_tile<kD>(q_tile, nullptr, q_rows + C, 3 * C, s0, T);
  load_tile<kD>(dy_tile, nullptr, q_rows + 2 * C, 3 * C, s0, T);
  __syncthreads();
  std::uint32_t k[kD / 16][4], v[kD / 16][4];
  load_a(k, q_tile, kRowWords<kD>, r0, at);
  load_a(v, dy_tile, kRowWords<kD>, r0, at);

  const std::int64_t key[2] = {s0 + r0 + at.group, s0 + r0 + at.group + 8};
  float dk[kD / 8][4], dv[kD / 8][4];
  zero(dk);
  zero(dv);
  const int tiles = static_cast<int>(gridDim.y);
  for (int qt = at.tile; qt < tiles; ++qt) {
    const std::int64_t q0 = std::int64_t{qt} * kTileRows;
    __syncthreads();  // every warp is done with the previous query tile (and the first, with k, v)
    load_tile<kD>(q_tile, q_t, q_rows, 3 * C, q0, T);
    load_tile<kD>(dy_tile, dy_t, dout + at.channels_offset, C, q0, T);
    for (int i = static_cast<int>(threadIdx.x); i < kTileRows; i += kThreads) {
      const std::int64_t t = q0 + i;
      const bool inside = t < T;
      row_m[i] = inside ? stats[2 * (at.bh * T + t)] : 0.0f;
      row_inverse[i] = inside ? 1.0f / stats[2 * (at.bh * T + t) + 1] : 0.0f;
      row_delta[i] = inside ? delta[at.bh * T + t] : 0.0f;
    }
    __syncthreads();
    float s[kTileColumns][4], dp[kTileColumns][4];  // transposed: rows keys, columns queries
    zero(s);
    zero(dp);
    multiply(s, k, q_tile, kRowWords<kD>, at);
    multiply(dp, v, dy_tile, kRowWords<kD>, at);
#pragma unroll
    for (int n = 0; n < kTileColumns; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int i = 8 * n + 2 * at.pair + (e & 1);
        const std::int64_t t = q0 + i;
        const bool seen = key[e / 2] <= t && t < T && key[e / 2] < T;
        const float p = seen ? exp2f((s[n][e] * scale - row_m[i]) * kLog2e) * row_inverse[i] : 0.0f;
        s[n][e] = p;
        dp[n][e] = p * (dp[n][e] - row_delta[i]);  // ds
      }
    }
    std::uint32_t p[kTileChunks][4], ds[kTileChunks][4];
    as_a(p, s);
    as_a(ds, dp);
    multiply(dv, p, dy_t, kTransposedWords, at);
    multiply(dk, ds, q_t, kTransposedWords, at);
  }
  const float k_factor[2] = {scale, scale}, v_factor[2] = {1.0f, 1.0f};
  store_rows(dqkv + at.qkv_offset + C, 3 * C, s0, r0, T, dk, k_factor, at);
  store_rows(dqkv + at.qkv_offset + 2 * C, 3 * C, s0, r0, T, dv, v_factor, at);
}

}  // namespace zl::cuda::fast_attention
