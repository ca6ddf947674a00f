// cuda_kernels.hpp — host-side launchers of the CUDA Device's kernels (private to src/ops/cuda).
// Pointers are device pointers; sizes are checked by the caller (cuda_device.cpp). Every launcher
// queues its kernels on `stream` and checks the launch. Kernels that validate indices write the
// smallest bad flat index into `bad_index` (atomicMin), which the caller reset to all ones.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#include "comm/comm.hpp"
#include "core/dtype.hpp"
#include "ops/cuda/fp16_bits.hpp"

namespace zl {
struct AdamWTensor;
struct AdamWGradRead;
struct AdamWScalars;
}  // namespace zl

namespace zl::cuda {

/// y[r, o] += b[o] for every row r of y [rows, cols].
void add_bias_rows(float* y, const float* b, std::int64_t rows, std::int64_t cols,
                   cudaStream_t stream);
// The launchers below that take an element type H are there for the two 16-bit formats only:
// H = std::uint16_t (bf16) or Fp16 (fp16), each element widened exactly as it is read and rounded
// to nearest even as it is written.

/// The same with a 16-bit bias (widened, exact).
template <class H>
void add_bias_rows(float* y, const H* b, std::int64_t rows, std::int64_t cols, cudaStream_t stream);

/// out[r, o] = y[r, o] + b[o] rounded to H, or y[r, o] rounded when b is null: add_bias_rows
/// followed by a conversion, in one pass.
template <class H>
void add_bias_round_rows(const float* y, const float* b, H* out, std::int64_t rows,
                         std::int64_t cols, cudaStream_t stream);
/// The same with a bias in H (widened, exact), or none when b is null.
template <class H>
void add_bias_round_rows(const float* y, const H* b, H* out, std::int64_t rows, std::int64_t cols,
                         cudaStream_t stream);

/// Columns of one group of a column sum (a block's threads, one column each).
inline constexpr int kColumnSumGroupColumns = 128;

/// The column groups a column sum of `cols` columns is cut into: it needs that many counters.
inline std::int64_t column_sum_groups(std::int64_t cols) {
  return (cols + kColumnSumGroupColumns - 1) / kColumnSumGroupColumns;
}

/// db[o] += the column of dy summed in float in ops/column_sums.hpp's order and added once:
/// CpuDevice's bias gradient, operation for operation, in one launch (the last chunk of each
/// column group adds the chunks). Where `rounded` is not null, it also gets dy rounded to H (the
/// products' dy, from the same read). `partials` is device scratch of column_sum_chunks(rows) *
/// cols floats, `counters` column_sum_groups(cols) zeroed counters (left zeroed); at most 65535
/// chunks (checked by the caller).
template <class H>
void add_column_sums(const float* dy, float* db, H* rounded, float* partials, unsigned* counters,
                     std::int64_t rows, std::int64_t cols, cudaStream_t stream);

/// Exact-erf GELU forward and backward, in double, rounded once.
void gelu_forward(const float* x, float* y, std::int64_t elems, cudaStream_t stream);
void gelu_backward(const float* x, const float* dy, float* dx, std::int64_t elems,
                   cudaStream_t stream);

/// tanh GELU forward and backward, in double, rounded once.
void gelu_tanh_forward(const float* x, float* y, std::int64_t elems, cudaStream_t stream);
void gelu_tanh_backward(const float* x, const float* dy, float* dx, std::int64_t elems,
                        cudaStream_t stream);
/// The same on 16-bit x (and y).
template <class H>
void gelu_tanh_forward(const H* x, H* y, std::int64_t elems, cudaStream_t stream);
template <class H>
void gelu_tanh_backward(const H* x, const float* dy, float* dx, std::int64_t elems,
                        cudaStream_t stream);

/// One block per row of logits [rows, padded_classes]: over the first `classes` columns writes
/// dlogits = (softmax - onehot) / mean_rows and row_losses[r] (double), and 0 in the padded
/// columns; a label outside [0, classes) records its row in bad_index and leaves that row
/// untouched.
void cross_entropy(const float* logits, const std::int64_t* labels, float* dlogits,
                   double* row_losses, unsigned long long* bad_index, std::int64_t rows,
                   std::int64_t classes, std::int64_t padded_classes, std::int64_t mean_rows,
                   cudaStream_t stream);
/// The same on 16-bit logits and dlogits (which may be the same), each dlogits value multiplied
/// by `scale` (one float multiply) before it is rounded.
template <class H>
void cross_entropy(const H* logits, const std::int64_t* labels, H* dlogits, double* row_losses,
                   unsigned long long* bad_index, std::int64_t rows, std::int64_t classes,
                   std::int64_t padded_classes, std::int64_t mean_rows, float scale,
                   cudaStream_t stream);

/// total[0] = total[0] + (float)(loss_sum[0] / rows), rounded as the host rounds: one thread.
void add_mean_loss(const double* loss_sum, std::int64_t rows, float* total, cudaStream_t stream);

/// loss_sum[0] = loss_sum[0] + row_losses[0] + ... + row_losses[rows - 1], summed in row order in
/// double by one thread (the CPU's order), then added once.
void add_row_losses(const double* row_losses, std::int64_t rows, double* loss_sum,
                    cudaStream_t stream);

/// x[b, t, :] = wte[tokens[b, t], :] + wpe[t, :]; a bad token records its flat index b*T + t.
void embedding_forward(const std::int64_t* tokens, const float* wte, const float* wpe, float* x,
                       std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                       std::int64_t vocab, unsigned long long* bad_index, cudaStream_t stream);
/// The same with 16-bit tables (cuda_embedding.cu), widened exactly before the fp32 add.
template <class H>
void embedding_forward(const std::int64_t* tokens, const H* wte, const H* wpe, float* x,
                       std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                       std::int64_t vocab, unsigned long long* bad_index, cudaStream_t stream);

/// dwte[token] += dx rows and dwpe[t] += dx rows in the order b = 0.., t = 0..; a bad token
/// records its flat index and adds nothing. `links` is device scratch of 2 * batch * seq_len
/// int32 (each row's next row of its token, and whether it is the token's first), so the rows
/// must number below 2^31 (checked by the caller).
void embedding_backward(const std::int64_t* tokens, const float* dx, float* dwte, float* dwpe,
                        std::int32_t* links, std::int64_t batch, std::int64_t seq_len,
                        std::int64_t channels, std::int64_t vocab, unsigned long long* bad_index,
                        cudaStream_t stream);

/// LayerNorm forward, one block per row, sums in double (two passes).
void layernorm_forward(const float* x, const float* weight, const float* bias, float* y,
                       float* mean, float* rstd, std::int64_t rows, std::int64_t channels,
                       cudaStream_t stream);
/// The same with y in H, rounded from the fp32 value as it is written.
template <class H>
void layernorm_forward(const float* x, const float* weight, const float* bias, H* y, float* mean,
                       float* rstd, std::int64_t rows, std::int64_t channels, cudaStream_t stream);
/// The same with weight and bias in H (widened, exact) and y in fp32.
template <class H>
void layernorm_forward(const float* x, const H* weight, const H* bias, float* y, float* mean,
                       float* rstd, std::int64_t rows, std::int64_t channels, cudaStream_t stream);
/// The same with weight, bias and y in H.
template <class H>
void layernorm_forward(const float* x, const H* weight, const H* bias, H* y, float* mean,
                       float* rstd, std::int64_t rows, std::int64_t channels, cudaStream_t stream);

/// LayerNorm backward: dx (added into) one warp per row; dweight and dbias in double in
/// ops/column_sums.hpp's order, through `partials`, device scratch of 2 *
/// column_sum_chunks(rows) * channels doubles (at most 65535 chunks, checked by the caller), and
/// column_sum_groups(channels) zeroed `counters` (left zeroed).
void layernorm_backward(const float* x, const float* weight, const float* mean, const float* rstd,
                        const float* dy, float* dx, float* dweight, float* dbias, double* partials,
                        unsigned* counters, std::int64_t rows, std::int64_t channels,
                        cudaStream_t stream);
/// The same with the weight in H (widened, exact).
template <class H>
void layernorm_backward(const float* x, const H* weight, const float* mean, const float* rstd,
                        const float* dy, float* dx, float* dweight, float* dbias, double* partials,
                        unsigned* counters, std::int64_t rows, std::int64_t channels,
                        cudaStream_t stream);

/// Causal softmax of each row of scores [rows, T] in place: row r is query position t = r % T;
/// with m its largest score over s <= t and l = sum_s exp(score - m) in double rounded to float,
/// entries s <= t become float(exp(score - m) / l) (in double), entries s > t become 0, and row r
/// of stats [rows, 2] becomes {m, l} (Device::attention_forward's definition).
void causal_softmax(float* scores, float* stats, std::int64_t rows, std::int64_t seq_len,
                    cudaStream_t stream);

/// The same probabilities again from the same scores and the stats causal_softmax wrote, in place.
void causal_softmax_from_stats(float* scores, const float* stats, std::int64_t rows,
                               std::int64_t seq_len, cudaStream_t stream);

/// Its backward in place: with w = sum_{s <= t} probs_s dprobs_s (in double), dprobs_s becomes
/// probs_s (dprobs_s - w) for s <= t and 0 for s > t.
void causal_softmax_backward(const float* probs, float* dprobs, std::int64_t rows,
                             std::int64_t seq_len, cudaStream_t stream);

/// The largest head size (channels / heads) tiled_attention_forward and _backward take.
inline constexpr std::int64_t kTiledAttentionMaxHeadDim = 256;

/// Causal attention forward in tiles, with no T x T scratch (cuda_tiled_attention.cu): out
/// [B, T, C] and stats [B, heads, T, 2] = {m, l} of each query row by an online softmax, from qkv
/// [B, T, 3C], scores scaled by `scale`. Head size C / heads at most 256; seq_len / 32 tiles at
/// most 65535 and batch * heads below 2^31 (checked by the caller).
void tiled_attention_forward(const float* qkv, float* stats, float* out, std::int64_t batch,
                             std::int64_t seq_len, std::int64_t channels, std::int64_t heads,
                             float scale, cudaStream_t stream);

/// Its backward: dqkv [B, T, 3C] overwritten from the out and stats forward wrote and dout
/// [B, T, C]; `delta` is device scratch of batch * heads * seq_len floats.
void tiled_attention_backward(const float* qkv, const float* stats, const float* out,
                              const float* dout, float* dqkv, float* delta, std::int64_t batch,
                              std::int64_t seq_len, std::int64_t channels, std::int64_t heads,
                              float scale, cudaStream_t stream);

/// Whether fast_attention_forward and _backward take head size `head_dim`: 16, 32 or 64.
bool fast_attention_takes(std::int64_t head_dim);

/// Causal attention forward on the tensor cores (cuda_fast_attention.cu): the tiled kernels'
/// contract (out, and stats {m, l} per query row), with q, k, v and the probabilities rounded to
/// `tiles` (BF16, or F16) for the products and fp32 accumulation; repeats bit for bit, not the
/// CPU's bits. Head size one that fast_attention_takes; batch * heads below 2^31 and
/// ceil(seq_len / 64) at most 65535 (checked by the caller).
void fast_attention_forward(const float* qkv, float* stats, float* out, std::int64_t batch,
                            std::int64_t seq_len, std::int64_t channels, std::int64_t heads,
                            float scale, DType tiles, cudaStream_t stream);

/// The bytes of device scratch fast_attention_backward takes (per row delta and lse, and dout in
/// 16 bits).
std::size_t fast_attention_scratch_bytes(std::int64_t batch, std::int64_t seq_len,
                                         std::int64_t channels, std::int64_t heads);

/// Its backward: dqkv [B, T, 3C] overwritten; `scratch` is 16-byte aligned device scratch of
/// fast_attention_scratch_bytes.
void fast_attention_backward(const float* qkv, const float* stats, const float* out,
                             const float* dout, float* dqkv, void* scratch, std::int64_t batch,
                             std::int64_t seq_len, std::int64_t channels, std::int64_t heads,
                             float scale, DType tiles, cudaStream_t stream);

/// The same two with qkv and out in H, tiles in H: the fp32 launches' bits (tiles in H) on the
/// widened tensors, out rounded to H as it is written.
template <class H>
void fast_attention_forward(const H* qkv, float* stats, H* out, std::int64_t batch,
                            std::int64_t seq_len, std::int64_t channels, std::int64_t heads,
                            float scale, cudaStream_t stream);
template <class H>
void fast_attention_backward(const H* qkv, const float* stats, const H* out, const float* dout,
                             float* dqkv, void* scratch, std::int64_t batch, std::int64_t seq_len,
                             std::int64_t channels, std::int64_t heads, float scale,
                             cudaStream_t stream);

/// out[i] = in[i] converted between training dtypes (fp32, bf16, fp16; checked by the caller):
/// widened to fp32 exactly, rounded to nearest even (core/dtype.hpp's bits, NaN included).
void convert(const void* in, DType in_dtype, void* out, DType out_dtype, std::int64_t elems,
             cudaStream_t stream);

/// acc[i] = acc[i] + addend[i] in a training dtype: widened to fp32, one float add, rounded once.
void add(void* acc, const void* addend, DType dtype, std::int64_t elems, cudaStream_t stream);

/// x[i] = x[i] * factor (one float multiply each).
void scale(float* x, float factor, std::int64_t elems, cudaStream_t stream);

/// x[i] = x[i] / divisor (one IEEE float division each).
void divide(float* x, float divisor, std::int64_t elems, cudaStream_t stream);

/// x[i] = x[i] rounded to bf16 or fp16 (nearest even) and widened back to fp32, in place.
void round_to(float* x, DType dtype, std::int64_t elems, cudaStream_t stream);

/// partials[b] = sum over i in block b of (double) g[i] squared, i in order: one thread per block
/// of `block_elems`, so each partial is block_sumsq's, bit for bit.
void block_sumsq(const float* grads, double* partials, std::int64_t blocks,
                 std::int64_t block_elems, cudaStream_t stream);
/// The same on g[i] = grads[i] / divisor (one IEEE float division; none at 1), the gradients in
/// `dtype` (fp32, or bf16 or fp16 widened): Device::block_sumsq_unscaled.
void block_sumsq(const void* grads, DType dtype, float divisor, double* partials,
                 std::int64_t blocks, std::int64_t block_elems, cudaStream_t stream);

/// sums[n] = the pairwise tree sum of node n of optim/grad_norm.hpp's tree_cover(first_leaf,
/// leaf_count), from the `leaf_count` leaves (fp64 partials) that start at leaf `first_leaf`: a
/// block per sub-node of up to 1024 leaves, then passes over the sub-nodes' sums
/// (cuda_tree_sum.cuh), so each sum is tree_cover_sums', bit for bit. `scratch` holds
/// tree_sum_scratch_elems(leaf_count) doubles.
void tree_cover_sums(const double* leaves, std::int64_t leaf_count, std::int64_t first_leaf,
                     double* sums, double* scratch, cudaStream_t stream);

/// The doubles tree_cover_sums' scratch needs for `leaf_count` leaves.
std::int64_t tree_sum_scratch_elems(std::int64_t leaf_count);

/// One launch of the multi-tensor AdamW kernel over `count` <= kAdamWTensorsPerLaunch tensors
/// (adamw_cuda.hpp), checked by the caller.
void adamw_launch(const AdamWTensor* tensors, int count, const AdamWScalars& scalars,
                  AdamWGradRead read, cudaStream_t stream);

/// One launch of the rank-order reduction (reduce_cuda.hpp) over `world` <= kReduceMaxRanks
/// device arrays, checked by the caller.
void reduce_launch(const void* const* inputs, int world, void* out, std::int64_t count, DType dtype,
                   ReduceOp op, cudaStream_t stream);

}  // namespace zl::cuda
