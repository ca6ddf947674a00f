// cuda_fast_attention.cuh — the device code of the fast causal attention's forward and what the
// backward shares with it (private to src/ops/cuda; cuda_fast_attention.cu launches it,
// tests/cuda_emulation runs it on the CPU; the backward is cuda_fast_attention_backward.cuh):
// flash attention 2's order on the tensor cores. The tiles are in one 16-bit format, the kernels'
// Half: bf16 (std::uint16_t) or fp16 (Fp16). q, k, v and out are read in fp32 or in Half (the
// kernels' Elem; out written in it too), dout in fp32; a tile is rounded to Half (a Half one is
// taken as it is) as it comes into shared memory; every product (scores, p v, dp, dq, dk, dv)
// is a warp's mma.sync on Half with fp32 accumulators (cuda_mma.cuh); the softmax runs in fp32.
//
// A block of 4 warps takes 64 rows of one (batch element, head): forward and the dq kernel 64
// queries, the dk/dv kernel 64 keys, 16 rows a warp (an MMA's rows). It walks the other side 64
// rows at a time through shared memory in two stages: the next tile comes in by cp.async (Half
// tiles; fp32 ones are rounded by the threads) while the warps multiply the current one. Tiles are
// stored row-major only; the products that need one transposed read it by ldmatrix.trans. Scores
// stay in registers: a product's accumulators, packed to Half, are the next product's A operand.
// Forward keeps a running max and sum per query row (online softmax) and writes out and each
// row's stats {m, l}, the Device contract. Backward rebuilds the probabilities from the stats in
// two kernels, with no atomics: the dq kernel, per query tile, also writes delta_t = dout_t .
// out_t (fp32, from dout and out as passed), each row's lse and dout in Half to scratch, and the
// dk/dv kernel, per key tile, reads them.
//
// Every sum has a fixed order (an MMA's, then tile after tile; a row's max and sum over the 4
// lanes that hold it by a fixed butterfly), so a result repeats bit for bit run to run; it is
// not the CPU's order or precision (the exact kernels, cuda_tiled_attention.cuh, give those).
// Head sizes 16, 32 and 64 (with_head_dim); any sequence length. Only the diagonal tile is masked
// (a key past its query): a row past T is zeros in every tile, with lse and delta 0, so it adds
// nothing to dk and dv, and what it gives its own out, stats and dq is not written.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <type_traits>

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
inline constexpr float kLog2e = 1.44269504088896341f;
static_assert(kThreads == 2 * kTileRows, "the dq kernel's delta takes two threads a row");

/// Words of a row-major tile's row for head size kD: kD / 2 pairs of 16-bit elements, padded by 4
/// (16 bytes), so that the 8 rows of a ldmatrix matrix fall in different banks.
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

/// The tiles' format for q, k, v and out of element type Elem: their own for bf16 and fp16; for
/// fp32 bf16 by default (a launch may pick fp16).
template <class Elem>
struct TilesOf {
  using type = std::uint16_t;
};
template <>
struct TilesOf<Fp16> {
  using type = Fp16;
};

/// True for the element types kernels with Half tiles take: fp32, and Half itself.
template <class Elem, class Half>
inline constexpr bool kTakesElem = std::is_same_v<Elem, float> || std::is_same_v<Elem, Half>;

// An element of q, k, v or out in fp32: itself, or its 16-bit bits widened (exact); and written
// from fp32: itself, or rounded to its 16-bit format (nearest even).
ZL_HOST_DEVICE inline float element(float value) {
  return value;
}
ZL_HOST_DEVICE inline float element(std::uint16_t bits) {
  return mma::unpack_bf16(bits, false);
}
ZL_HOST_DEVICE inline float element(Fp16 value) {
  return mma::widen_f16(value.bits);
}
ZL_HOST_DEVICE inline void store_element(float* to, float value) {
  *to = value;
}
ZL_HOST_DEVICE inline void store_element(std::uint16_t* to, float value) {
  *to = static_cast<std::uint16_t>(mma::bf16_bits(value));
}
ZL_HOST_DEVICE inline void store_element(Fp16* to, float value) {
  to->bits = mma::f16_bits(value);
}

// Four neighbouring elements in fp32 (one 16-byte load; 8 bytes in bf16 or fp16).
__device__ inline float4 load4(const float* from) {
  return *reinterpret_cast<const float4*>(from);
}
template <class H>
__device__ inline float4 load4(const H* from) {
  const auto words = *reinterpret_cast<const uint2*>(from);
  return {mma::unpack<H>(words.x, false), mma::unpack<H>(words.x, true),
          mma::unpack<H>(words.y, false), mma::unpack<H>(words.y, true)};
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

// Rows t0 .. t0 + 63 of `rows` (row t at rows + t * stride) into `tile` [64][kRowWords] in Half,
// rows past T as zeros; 8 channels (16 bytes of the tile) a thread at a time. Half rows go as they
// are: by cp.async when `async` (every row 16-byte aligned; the caller commits and waits) and by
// loads otherwise.
template <int kD, class Half>
__device__ inline void load_tile(std::uint32_t* tile, const Half* half_rows, std::int64_t stride,
                                 std::int64_t t0, std::int64_t T, bool async) {
  static_assert(sizeof(Half) == 2, "a tile's elements are 16 bits");
  const auto* rows = reinterpret_cast<const std::uint16_t*>(half_rows);
  constexpr int kEights = kD / 8;
  for (int e = static_cast<int>(threadIdx.x); e < kTileRows * kEights; e += kThreads) {
    const int i = e / kEights, d = 8 * (e % kEights);
    const std::int64_t t = t0 + i;
    std::uint32_t* to = tile + i * kRowWords<kD> + d / 2;
    if (t >= T) {
      *reinterpret_cast<uint4*>(to) = uint4{0u, 0u, 0u, 0u};
    } else if (async) {
      mma::copy16_async(to, rows + t * stride + d);
    } else {
      const std::uint16_t* from = rows + t * stride + d;
      for (int w = 0; w < 4; ++w) {
        to[w] = std::uint32_t{from[2 * w]} | (std::uint32_t{from[2 * w + 1]} << 16);
      }
    }
  }
}

// The same from fp32 rows, rounded to Half on the way (`async` is not used); each row below T is
// also written to `copy` (row t at copy + t * copy_stride, 16-byte aligned) when it is not null.
template <int kD, class Half>
__device__ inline void load_tile(std::uint32_t* tile, const float* rows, std::int64_t stride,
                                 std::int64_t t0, std::int64_t T, bool /*async*/,
                                 Half* copy = nullptr, std::int64_t copy_stride = 0) {
  constexpr int kEights = kD / 8;
  for (int e = static_cast<int>(threadIdx.x); e < kTileRows * kEights; e += kThreads) {
    const int i = e / kEights, d = 8 * (e % kEights);
    const std::int64_t t = t0 + i;
    float4 a{0.0f, 0.0f, 0.0f, 0.0f}, b{0.0f, 0.0f, 0.0f, 0.0f};
    if (t < T) {
      a = load4(rows + t * stride + d);
      b = load4(rows + t * stride + d + 4);
    }
    const uint4 words{mma::pack<Half>(a.x, a.y), mma::pack<Half>(a.z, a.w),
                      mma::pack<Half>(b.x, b.y), mma::pack<Half>(b.z, b.w)};
    *reinterpret_cast<uint4*>(tile + i * kRowWords<kD> + d / 2) = words;
    if (copy != nullptr && t < T) *reinterpret_cast<uint4*>(copy + t * copy_stride + d) = words;
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

// acc[n] += a b_n for n < kN, where B_n's column j is row 8 n + j of `tile` (a row-major tile
// whose rows are the product's columns, its channels along k): kChunks chunks of 16 k, in order,
// two columns' B operands (four matrices) a ldmatrix; a and the tile in Half.
template <int kN, int kChunks, int kWords, class Half>
__device__ inline void multiply(float (&acc)[kN][4], const std::uint32_t (&a)[kChunks][4],
                                const std::uint32_t* tile, const Place& at) {
  const int i = at.lane / 8, j = at.lane % 8;
#pragma unroll
  for (int n = 0; n < kN; n += 2) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      std::uint32_t b[4];  // (n, k 16 c ..), (n, k 16 c + 8 ..), then the same of n + 1
      mma::load_matrices(b, tile + (8 * (n + i / 2) + j) * kWords + 8 * c + 4 * (i % 2));
      mma::product<Half>(acc[n], a[c], b[0], b[1]);
      mma::product<Half>(acc[n + 1], a[c], b[2], b[3]);
    }
  }
}

// acc[n] += a b_n for n < kN, where B is `tile` itself (rows along k, kChunks chunks of 16 rows,
// in order; B_n's column j is channel 8 n + j): the B operands by the transposed ldmatrix.
template <int kN, int kChunks, int kWords, class Half>
__device__ inline void multiply_transposed(float (&acc)[kN][4],
                                           const std::uint32_t (&a)[kChunks][4],
                                           const std::uint32_t* tile, const Place& at) {
  const int i = at.lane / 8, j = at.lane % 8;
#pragma unroll
  for (int n = 0; n < kN; n += 2) {
#pragma unroll
    for (int c = 0; c < kChunks; ++c) {
      std::uint32_t b[4];  // (rows 16 c .., channels 8 n ..), (rows 16 c + 8 ..), then 8 (n + 1)
      mma::load_matrices_transposed(b,
                                    tile + (16 * c + 8 * (i % 2) + j) * kWords + 4 * (n + i / 2));
      mma::product<Half>(acc[n], a[c], b[0], b[1]);
      mma::product<Half>(acc[n + 1], a[c], b[2], b[3]);
    }
  }
}

// The A operands (kN / 2 chunks of 16 columns) of accumulators acc[kN][4], rounded to Half.
template <class Half, int kN>
__device__ inline void as_a(std::uint32_t (&a)[kN / 2][4], const float (&acc)[kN][4]) {
#pragma unroll
  for (int c = 0; c < kN / 2; ++c) {
    a[c][0] = mma::pack<Half>(acc[2 * c][0], acc[2 * c][1]);
    a[c][1] = mma::pack<Half>(acc[2 * c][2], acc[2 * c][3]);
    a[c][2] = mma::pack<Half>(acc[2 * c + 1][0], acc[2 * c + 1][1]);
    a[c][3] = mma::pack<Half>(acc[2 * c + 1][2], acc[2 * c + 1][3]);
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

/// Words of one tile [64][kRowWords] for head size kD.
template <int kD>
inline constexpr int kTileWords = kTileRows* kRowWords<kD>;

/// Dynamic shared memory of each kernel for head size kD: forward a query tile and two stages of
/// key and value tiles; dq two stages of key and value tiles and its rows' delta; dk/dv two stages
/// of query and dout tiles and their rows' lse and delta.
template <int kD>
inline constexpr std::size_t kForwardSharedBytes = sizeof(std::uint32_t) * 5 * kTileWords<kD>;
template <int kD>
inline constexpr std::size_t kDqSharedBytes = sizeof(std::uint32_t) * 4 * kTileWords<kD> +
                                              sizeof(float) * kTileRows;
template <int kD>
inline constexpr std::size_t kDkvSharedBytes = sizeof(std::uint32_t) * 4 * kTileWords<kD> +
                                               sizeof(float) * 4 * kTileRows;

// Key tile `kt` of the head whose q is at `q_rows` (row t at q_rows + t * 3C; k at + C, v at
// + 2C) into `stage` in Half: k, then v a tile later.
template <int kD, class Half, class Elem>
__device__ inline void load_key_tile(std::uint32_t* stage, const Elem* q_rows, std::int64_t C,
                                     int kt, std::int64_t T, bool async) {
  const std::int64_t s0 = std::int64_t{kt} * kTileRows;
  load_tile<kD, Half>(stage, q_rows + C, 3 * C, s0, T, async);
  load_tile<kD, Half>(stage + kTileWords<kD>, q_rows + 2 * C, 3 * C, s0, T, async);
}

// Key tile `kt` of the walk to tile `last`, in the two stages at `stages` (stage s: k at
// stages + 2 s kTileWords, v a tile later): its k (v follows), with tile kt + 1, when there is
// one, started into the other stage to come in behind this tile's products.
template <int kD, class Half, class Elem>
__device__ inline const std::uint32_t* staged_key_tile(std::uint32_t* stages, const Elem* q_rows,
                                                       std::int64_t C, int kt, int last,
                                                       std::int64_t T, bool async) {
  if (kt < last) {
    load_key_tile<kD, Half>(stages + 2 * ((kt + 1) % 2) * kTileWords<kD>, q_rows, C, kt + 1, T,
                            async);
    mma::commit_copies();
  }
  return stages + 2 * (kt % 2) * kTileWords<kD>;
}

/// Forward: out [B, T, C] and stats {m, l} per query row from qkv [B, T, 3C]. Grid (B heads,
/// ceil(T / 64)), kThreads threads, kForwardSharedBytes<kD>; `async` when qkv is 16-byte aligned
/// (Half tiles then come by cp.async). The next key tile comes in while this one is multiplied.
template <int kD, class Elem = float, class Half = typename TilesOf<Elem>::type>
__global__ void __launch_bounds__(kThreads)
    forward_kernel(const Elem* qkv, float* stats, Elem* out, std::int64_t T, std::int64_t C,
                   std::int64_t heads, float scale, bool async) {
  static_assert(kTakesElem<Elem, Half>, "q, k, v and out are fp32 or in the tiles' format");
  constexpr int kWords = kRowWords<kD>, kTile = kTileWords<kD>;
  ZL_DYNAMIC_SHARED_FLOATS(shared);
  auto* q_tile = reinterpret_cast<std::uint32_t*>(shared);
  std::uint32_t* stages = q_tile + kTile;  // stage s: k at stages + 2 s kTile, then v
  const Place at = place(T, C, kD, heads, true);
  const Elem* q_rows = qkv + at.qkv_offset;
  const std::int64_t q0 = std::int64_t{at.tile} * kTileRows;
  const int r0 = at.warp * kWarpRows;
  load_tile<kD, Half>(q_tile, q_rows, 3 * C, q0, T, async);
  load_key_tile<kD, Half>(stages, q_rows, C, 0, T, async);
  mma::commit_copies();
  mma::wait_copies();
  __syncthreads();
  std::uint32_t q[kD / 16][4];
  load_a(q, q_tile, kWords, r0, at);

  const float scale_log2 = scale * kLog2e;
  const std::int64_t query[2] = {q0 + r0 + at.group, q0 + r0 + at.group + 8};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};  // m: the largest unscaled score
  float o[kD / 8][4];
  zero(o);
  for (int kt = 0; kt <= at.tile; ++kt) {
    const std::uint32_t* k_tile =
        staged_key_tile<kD, Half>(stages, q_rows, C, kt, at.tile, T, async);
    const std::uint32_t* v_tile = k_tile + kTile;
    float s[kTileColumns][4];
    zero(s);
    multiply<kTileColumns, kD / 16, kWords, Half>(s, q, k_tile, at);
    if (kt == at.tile) {  // the diagonal tile: keys past the query are masked (and so past T)
      const std::int64_t s0 = std::int64_t{kt} * kTileRows;
#pragma unroll
      for (int n = 0; n < kTileColumns; ++n) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const std::int64_t key = s0 + 8 * n + 2 * at.pair + (e & 1);
          if (key > query[e / 2]) s[n][e] = -INFINITY;
        }
      }
    }
    float row_max[2] = {m[0], m[1]};
#pragma unroll
    for (int n = 0; n < kTileColumns; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e)
        row_max[e / 2] = s[n][e] > row_max[e / 2] ? s[n][e] : row_max[e / 2];
    }
    // key 0 is in every row's first tile, so the max is finite from then on
    float rescale[2], shift[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      row_max[r] = group_max(row_max[r]);
      rescale[r] = mma::exp2_approx((m[r] - row_max[r]) * scale_log2);
      m[r] = row_max[r];
      l[r] = l[r] * rescale[r];
      shift[r] = m[r] * scale_log2;
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
        s[n][e] = mma::exp2_approx(fmaf(s[n][e], scale_log2, -shift[e / 2]));
        l[e / 2] = l[e / 2] + s[n][e];
      }
    }
    std::uint32_t p[kTileChunks][4];
    as_a<Half>(p, s);
    multiply_transposed<kD / 8, kTileChunks, kWords, Half>(o, p, v_tile, at);
    mma::wait_copies();
    __syncthreads();  // the next key tile is in, and every warp is done with this one
  }
  float inverse[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] = group_sum(l[r]);
    inverse[r] = 1.0f / l[r];
    if (at.pair == 0 && query[r] < T) {
      float* row_stats = stats + 2 * (at.bh * T + query[r]);
      row_stats[0] = m[r] * scale;
      row_stats[1] = l[r];
    }
  }
  store_rows(out + at.channels_offset, C, q0, r0, T, o, inverse, at);
}

}  // namespace zl::cuda::fast_attention
