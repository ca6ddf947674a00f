// device.hpp — the Device interface: tagged allocation (feeding the rank's memory ledger) and
// the kernels models and optimizers need. cpu/ implements it with Eigen and plain loops; a CUDA
// device implements the same table. Kernels take raw spans in row-major layout and check them
// once, in device.cpp, before the device's own code runs.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "core/buffer.hpp"
#include "core/memory_ledger.hpp"
#include "ops/attention_kind.hpp"
#include "ops/tensor_view.hpp"
#include "optim/adamw.hpp"

namespace zl {

/// Floats attention keeps per query row and head: the row's largest score and its sum of
/// exponentials (Device::attention_forward).
inline constexpr std::int64_t kAttentionStatsPerRow = 2;

/// The scale of attention's scores, 1 / sqrt(head_dim), in double (every device rounds it the
/// same way from here).
inline double attention_scale(std::int64_t head_dim) {
  return 1.0 / std::sqrt(static_cast<double>(head_dim));
}

/// Memory and kernels of one rank. Not thread-safe: one Device per rank.
///
/// A device's memory may be out of the host's reach (a GPU's): engines and models never read or
/// write a Buffer's elements themselves. They move bytes with the copy calls below and do the
/// training step's elementwise work (casts, accumulation, unscaling, the norm's partials, AdamW)
/// with the step calls, which every device implements with the CPU's bits.
///
/// The kernels are non-virtual and check their arguments once for every device, with the same
/// messages (device.cpp: every span has the elements its shapes need, the sizes make sense).
/// Then each calls the protected virtual of its name with a `do_` prefix (linear_forward ->
/// do_linear_forward) with the same arguments. A device implements the `do_` kernels and checks
/// only what is its own: cuBLAS's 32-bit sizes, a GPU's launch limits, the tokens and labels it
/// reads.
class Device : public Allocator {
 public:
  /// Allocates a zeroed buffer booked under `category` in this device's ledger.
  Buffer alloc(MemCategory category, DType dtype, Shape shape) {
    return Buffer(*this, ledger_, category, dtype, std::move(shape));
  }
  /// Allocates a zeroed buffer booked as Activations of kind `kind` in this device's ledger.
  Buffer alloc_activation(ActivationKind kind, DType dtype, Shape shape) {
    return Buffer(*this, ledger_, MemCategory::Activations, dtype, std::move(shape), kind);
  }
  /// alloc(), for a buffer written whole before it is read: its contents are unset
  /// (Allocator::allocate_unset; a GPU skips the zeroing).
  Buffer alloc_unset(MemCategory category, DType dtype, Shape shape) {
    return Buffer(*this, ledger_, category, dtype, std::move(shape), ActivationKind::Scratch,
                  Contents::Unset);
  }
  /// alloc_activation(), for an activation written whole before it is read: its contents are
  /// unset.
  Buffer alloc_activation_unset(ActivationKind kind, DType dtype, Shape shape) {
    return Buffer(*this, ledger_, MemCategory::Activations, dtype, std::move(shape), kind,
                  Contents::Unset);
  }
  /// Bytes in use and peak bytes per category on this device.
  MemoryLedger& ledger() { return ledger_; }
  /// Read-only view of the ledger: current and peak bytes per category.
  const MemoryLedger& ledger() const { return ledger_; }

  // ---- memory: pointers named `device` are this device's memory, `host` the host's ----

  /// Copies `bytes` bytes of host memory into device memory; `host` may be reused on return.
  virtual void copy_from_host(void* device, const void* host, std::size_t bytes) = 0;
  /// Copies `bytes` bytes of device memory into host memory, complete on return.
  virtual void copy_to_host(void* host, const void* device, std::size_t bytes) = 0;
  /// Copies `bytes` bytes between two device buffers that do not overlap (or are the same one,
  /// which copies nothing).
  virtual void copy(void* to, const void* from, std::size_t bytes) = 0;
  /// Sets `bytes` bytes of device memory to zero.
  virtual void fill_zero(void* device, std::size_t bytes) = 0;
  /// Blocks the host until all work queued on this device is done (a CPU device has none).
  virtual void synchronize() = 0;
  /// How many times this device has made the host wait for its queued work: a GPU's
  /// synchronize, its reads into host memory, a kernel that returns a value to the host. 0 on a
  /// CPU device, whose work is done as each call returns; the detached stand-in for a GPU
  /// (cpu/detached_cpu_device.hpp) counts the calls a GPU waits in.
  std::int64_t host_waits() const { return host_waits_; }
  /// Milliseconds the host spent blocked in those waits (steady clock): 0 on a CPU device and on
  /// the detached stand-in, which count waits but never block.
  double host_wait_ms() const { return host_wait_ms_; }

  // ---- the training step's elementwise work, on device memory; every device gives the bits of
  // the host code named (core/dtype.hpp's conversions, float arithmetic without contraction) ----

  /// out[i] = in[i] converted between training dtypes (fp32, bf16, fp16): widening to fp32 is
  /// exact, rounding to 16 bits is to nearest even (f32_to_bf16, f32_to_f16), and the same dtype
  /// is a copy. `in` and `out` do not overlap unless they are the same pointer and dtype.
  virtual void convert(const void* in, DType in_dtype, void* out, DType out_dtype,
                       std::int64_t elems) = 0;
  /// acc[i] = acc[i] + addend[i], widened to fp32, added once and rounded once to `dtype`: what a
  /// two-input rank-order Sum computes (comm/reduce.hpp).
  virtual void add(void* acc, const void* addend, DType dtype, std::int64_t elems) = 0;
  /// x[i] = x[i] * factor (one float multiply each).
  virtual void scale(std::span<float> x, float factor) = 0;
  /// x[i] = x[i] / divisor (one IEEE float division each; loss unscaling).
  virtual void divide(std::span<float> x, float divisor) = 0;
  /// x[i] = x[i] rounded to `dtype` (bf16 or fp16, to nearest even) and widened back to fp32, in
  /// place: the value a 16-bit copy of x holds, as fp32 (a copy of x for fp32). Throws zl::Error
  /// for a dtype that is not a training dtype.
  virtual void round_to(std::span<float> x, DType dtype) = 0;
  /// optim/grad_norm.hpp's block_sumsq on device gradients: one fp64 sum of squares per block of
  /// kNormBlockElems, in index order, block i into the device's partials[i] (partials.size() =
  /// the blocks): the gradient norm's partials stay on the device until they are gathered and
  /// read once.
  virtual void block_sumsq(std::span<const float> grads, std::span<double> partials) = 0;
  /// optim/grad_norm.hpp's tree_cover_sums on device memory: the pairwise tree sums of the
  /// largest tree nodes inside leaves [first_leaf, first_leaf + leaves.size()) (a rank's block
  /// partials of one unit), in tree_cover's order, into `sums` (one per node), so a step reads a
  /// few sums per unit instead of every partial.
  void tree_cover_sums(std::span<const double> leaves, std::int64_t first_leaf,
                       std::span<double> sums);
  /// One AdamW step (optim/adamw.hpp's adamw_update, element for element) on device spans of
  /// equal size: fp32 parameters (or master), gradients, and the two moments.
  virtual void adamw_update(std::span<float> params, std::span<const float> grads,
                            std::span<float> exp_avg, std::span<float> exp_avg_sq,
                            const AdamWScalars& scalars) = 0;
  /// adamw_update on the fp32 master `master`, then the training copy `rounded` (params.size()
  /// elements of `rounded_dtype`, bf16 or fp16) set to the new master rounded to nearest even:
  /// the bits of the two calls adamw_update and convert, which is what this default does. A
  /// device may fuse them into one pass (CudaDevice does for bf16, writing the copy as it goes).
  virtual void adamw_update_rounded(std::span<float> master, std::span<const float> grads,
                                    std::span<float> exp_avg, std::span<float> exp_avg_sq,
                                    const AdamWScalars& scalars, void* rounded,
                                    DType rounded_dtype);

  // ---- the update's reads of a unit's reduced gradient, fp32 or 16-bit as it was reduced: the
  // gradient as the update sees it is g[i] = grads[i] widened to fp32 (exact), divided by
  // `divisor` (one IEEE float division; none at 1: loss unscaling) and multiplied by `clip` (one
  // float multiply; none at 1), the bits of widening into fp32 and calling divide() and scale().
  // Nothing is written to `grads` and nothing is booked: a device reads them as they are. ----

  /// block_sumsq on g (clip 1): the gradient norm's partials of the unscaled gradient.
  void block_sumsq_unscaled(TensorIn grads, float divisor, std::span<double> partials);
  /// adamw_update on g; then, when `rounded` is not null, the parameters set from the new master
  /// as adamw_update_rounded sets them (rounded to bf16 or fp16, or copied for fp32: an offloaded
  /// master's parameters on the device). `master` is the fp32 master, or the fp32 parameters
  /// themselves with no copy.
  void adamw_update_unscaled(std::span<float> master, TensorIn grads, float divisor, float clip,
                             std::span<float> exp_avg, std::span<float> exp_avg_sq,
                             const AdamWScalars& scalars, void* rounded, DType rounded_dtype);

  // ---- kernels (row-major). Spans are fp32. A TensorIn or TensorOut may also be bf16 or fp16
  // (tensor_view.hpp): the kernel computes on its inputs widened to fp32 (exact) and rounds a
  // 16-bit output once, to nearest even, from the fp32 value it would write: the bits of the
  // fp32 kernel between a widening and a rounding. ----

  /// y[rows, out] = x[rows, in] * w[out, in]^T + b[out]; b may be empty (no bias, as GPT-2's
  /// LM head: logits[rows, vocab] = x[rows, C] * wte[vocab, C]^T).
  void linear_forward(TensorIn x, TensorIn w, TensorIn b, TensorOut y, std::int64_t rows,
                      std::int64_t in, std::int64_t out);

  /// Given dy[rows, out]: dw[out, in] += dy^T x, db[out] += sum over rows of dy (rows in order),
  /// dx[rows, in] = dy w (db may be empty when there is no bias, dx when the input needs no
  /// gradient).
  void linear_backward(TensorIn x, TensorIn w, TensorIn dy, std::span<float> dw,
                       std::span<float> db, std::span<float> dx, std::int64_t rows, std::int64_t in,
                       std::int64_t out);

  /// y = x * Phi(x) with the exact erf form, as torch.nn.GELU().
  void gelu_forward(std::span<const float> x, std::span<float> y);

  /// dx = dy * d/dx[x * Phi(x)].
  void gelu_backward(std::span<const float> x, std::span<const float> dy, std::span<float> dx);

  /// Mean cross-entropy of logits[rows, padded_classes] against labels[rows] in [0, classes);
  /// writes d(loss)/d(logits). Only a row's first `classes` columns are classes: the columns
  /// [classes, padded_classes) (GPT-2's padded vocabulary) take no part in the max, the softmax
  /// or the loss, and their dlogits are 0. `dlogits` may be `logits` itself (in place): each row
  /// is read whole before it is written.
  float cross_entropy_forward_backward(std::span<const float> logits,
                                       std::span<const std::int64_t> labels,
                                       std::span<float> dlogits, std::int64_t rows,
                                       std::int64_t classes, std::int64_t padded_classes);

  /// cross_entropy_forward_backward for `rows` rows of a batch of `mean_rows` rows (rows <=
  /// mean_rows), so a batch can go through in chunks: returns the chunk's row losses summed in row
  /// order in double and writes dlogits = (softmax - onehot) / mean_rows (0 in padded columns).
  double cross_entropy_sum_forward_backward(std::span<const float> logits,
                                            std::span<const std::int64_t> labels,
                                            std::span<float> dlogits, std::int64_t rows,
                                            std::int64_t classes, std::int64_t padded_classes,
                                            std::int64_t mean_rows);

  /// cross_entropy_sum_forward_backward with the chunk's sum kept on the device: loss_sum[0]
  /// (one device double) becomes loss_sum[0] + the chunk's row losses summed in row order, the
  /// bits of adding the returned sum on the host, and the host does not wait. Each dlogits value
  /// is multiplied by `grad_scale` (one float multiply; none at 1) before it is rounded to
  /// dlogits' dtype. `dlogits` may be `logits` itself, in any dtype. A label out of range throws
  /// zl::Error here or, on a GPU, at its next host wait.
  void cross_entropy_add_forward_backward(TensorIn logits, std::span<const std::int64_t> labels,
                                          TensorOut dlogits, std::int64_t rows,
                                          std::int64_t classes, std::int64_t padded_classes,
                                          std::int64_t mean_rows, std::span<double> loss_sum,
                                          float grad_scale = 1.0f);

  /// A micro-batch's mean loss added to the step's sum, on the device: total[0] becomes total[0] +
  /// (float)(loss_sum[0] / rows) (a double division rounded to float, then one float addition),
  /// the bits of reading the loss and adding it on the host, without the host waiting.
  void add_mean_loss(std::span<const double> loss_sum, std::int64_t rows, std::span<float> total);
  /// The value add_mean_loss adds, read to the host: (float)(loss_sum[0] / rows). The host waits.
  float read_mean_loss(std::span<const double> loss_sum, std::int64_t rows);

  // ---- GPT-2 kernels (fp32, row-major; cpu/cpu_gpt_kernels.cpp and cpu/cpu_attention.cpp).
  // B is the batch, T the sequence length, C the channels (n_embd), N = B*T the rows of the
  // token-major activations [B, T, C]. ----

  /// Token plus position embedding: x[b, t, :] = wte[tokens[b, t], :] + wpe[t, :], with
  /// tokens [B, T], wte [vocab, C], wpe [T, C] (the first T rows of the model's position table;
  /// both tables in one dtype), x [B, T, C]. Throws zl::Error naming the row and position of a
  /// token outside [0, vocab).
  void embedding_forward(std::span<const std::int64_t> tokens, TensorIn wte, TensorIn wpe,
                         std::span<float> x, std::int64_t batch, std::int64_t seq_len,
                         std::int64_t channels, std::int64_t vocab);

  /// Given dx [B, T, C]: dwte[tokens[b, t], :] += dx[b, t, :] and dwpe[t, :] += dx[b, t, :], in
  /// the order b = 0.., t = 0.. (a token seen twice gets its two rows added in that order).
  void embedding_backward(std::span<const std::int64_t> tokens, std::span<const float> dx,
                          std::span<float> dwte, std::span<float> dwpe, std::int64_t batch,
                          std::int64_t seq_len, std::int64_t channels, std::int64_t vocab);

  /// LayerNorm over the last axis of x [rows, C] (eps 1e-5, biased variance, as torch):
  /// mean[r] = sum_c x[r, c] / C, rstd[r] = 1 / sqrt(sum_c (x[r, c] - mean[r])^2 / C + eps),
  /// y[r, c] = (x[r, c] - mean[r]) * rstd[r] * weight[c] + bias[c]. mean and rstd [rows] are kept
  /// for the backward pass. weight and bias are in one dtype.
  void layernorm_forward(std::span<const float> x, TensorIn weight, TensorIn bias, TensorOut y,
                         std::span<float> mean, std::span<float> rstd, std::int64_t rows,
                         std::int64_t channels);

  /// Given dy [rows, C], with xhat = (x - mean) * rstd and g = dy * weight:
  /// dx[r, c] += rstd[r] * (g[r, c] - mean_c(g[r, :]) - xhat[r, c] * mean_c(g[r, :] * xhat[r, :])),
  /// dweight[c] += sum_r dy[r, c] * xhat[r, c], dbias[c] += sum_r dy[r, c] (rows in order).
  /// dx is ADDED into: in a pre-LN block the LayerNorm's input is the residual stream, whose
  /// gradient already holds the skip connection's part.
  void layernorm_backward(std::span<const float> x, TensorIn weight, std::span<const float> mean,
                          std::span<const float> rstd, std::span<const float> dy,
                          std::span<float> dx, std::span<float> dweight, std::span<float> dbias,
                          std::int64_t rows, std::int64_t channels);

  /// Hugging Face's Conv1D, a Linear that stores its weight [in, out]:
  /// y[rows, out] = x[rows, in] * w[in, out] + b[out].
  void conv1d_forward(TensorIn x, TensorIn w, TensorIn b, TensorOut y, std::int64_t rows,
                      std::int64_t in, std::int64_t out);

  /// Given dy [rows, out]: dw[in, out] += x^T dy, db[out] += sum over rows of dy (rows in order),
  /// dx[rows, in] = dy w^T (overwritten; dx may be empty when the input needs no gradient).
  void conv1d_backward(TensorIn x, TensorIn w, std::span<const float> dy, std::span<float> dw,
                       std::span<float> db, std::span<float> dx, std::int64_t rows, std::int64_t in,
                       std::int64_t out);

  /// GPT-2's GELU, the tanh approximation (torch GELU(approximate="tanh")):
  /// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
  void gelu_tanh_forward(TensorIn x, TensorOut y);

  /// dx = dy * dy/dx of gelu_tanh: with u = sqrt(2/pi) (x + 0.044715 x^3),
  /// dy/dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) sqrt(2/pi) (1 + 3 * 0.044715 x^2).
  void gelu_tanh_backward(TensorIn x, std::span<const float> dy, std::span<float> dx);

  /// Causal multi-head self-attention on qkv [B, T, 3C] (q, k, v side by side, as c_attn writes
  /// them; head h is channels [h*D, (h+1)*D) of each, D = C / heads), with no T x T tensor kept:
  /// for query row (b, h, t), the scores z_s = q_t . k_s / sqrt(D) over s <= t give
  /// m = the largest score rounded to float and l = sum_s exp(z_s - m) rounded to float, kept in
  /// stats [B, heads, T, 2] as {m, l} (kAttentionStatsPerRow floats a row); the probabilities
  /// p_ts = float(exp(z_s - m) / l) are rebuilt from q, k and the stats whenever they are needed,
  /// the same bits in forward and backward; out[b, t, h*D + d] = sum_s p_ts v_s[d] (out [B, T, C],
  /// heads side by side, ready for c_proj).
  void attention_forward(TensorIn qkv, std::span<float> stats, TensorOut out, std::int64_t batch,
                         std::int64_t seq_len, std::int64_t channels, std::int64_t heads);

  /// Given forward's out [B, T, C] and stats, and dout [B, T, C], writes dqkv [B, T, 3C]
  /// (overwritten): with p_ts rebuilt as forward defines it, dp_ts = dout_t . v_s,
  /// delta_t = dout_t . out_t per head (which is sum_s p_ts dp_ts, as flash attention 2 computes
  /// it), ds_ts = p_ts (dp_ts - delta_t), dq_t = sum_s ds_ts k_s / sqrt(D),
  /// dk_s = sum_t ds_ts q_t / sqrt(D), dv_s = sum_t p_ts dout_t.
  void attention_backward(TensorIn qkv, std::span<const float> stats, TensorIn out,
                          std::span<const float> dout, std::span<float> dqkv, std::int64_t batch,
                          std::int64_t seq_len, std::int64_t channels, std::int64_t heads);

 protected:
  // ---- the kernels' implementations, called by the kernels above once their arguments have
  // passed the checks; the semantics are the public kernel's ----

  /// tree_cover_sums after its checks (one sum per cover node, first_leaf >= 0).
  virtual void do_tree_cover_sums(std::span<const double> leaves, std::int64_t first_leaf,
                                  std::span<double> sums) = 0;
  /// block_sumsq_unscaled after its checks (whole blocks, one partial each, divisor > 0).
  virtual void do_block_sumsq_unscaled(TensorIn grads, float divisor,
                                       std::span<double> partials) = 0;
  /// adamw_update_unscaled after its checks (every span of grads' size; rounded_dtype a training
  /// dtype when `rounded` is not null; divisor > 0).
  virtual void do_adamw_update_unscaled(std::span<float> master, TensorIn grads, float divisor,
                                        float clip, std::span<float> exp_avg,
                                        std::span<float> exp_avg_sq, const AdamWScalars& scalars,
                                        void* rounded, DType rounded_dtype) = 0;
  /// linear_forward after its checks.
  virtual void do_linear_forward(std::span<const float> x, std::span<const float> w,
                                 std::span<const float> b, std::span<float> y, std::int64_t rows,
                                 std::int64_t in, std::int64_t out) = 0;
  /// linear_backward after its checks.
  virtual void do_linear_backward(std::span<const float> x, std::span<const float> w,
                                  std::span<const float> dy, std::span<float> dw,
                                  std::span<float> db, std::span<float> dx, std::int64_t rows,
                                  std::int64_t in, std::int64_t out) = 0;
  /// gelu_forward after its checks.
  virtual void do_gelu_forward(std::span<const float> x, std::span<float> y) = 0;
  /// gelu_backward after its checks.
  virtual void do_gelu_backward(std::span<const float> x, std::span<const float> dy,
                                std::span<float> dx) = 0;
  /// cross_entropy_sum_forward_backward after its checks (1 <= rows <= mean_rows,
  /// 1 <= classes <= padded_classes): the row losses' sum in row order in double; the labels'
  /// range is the device's to check.
  virtual double do_cross_entropy_forward_backward(std::span<const float> logits,
                                                   std::span<const std::int64_t> labels,
                                                   std::span<float> dlogits, std::int64_t rows,
                                                   std::int64_t classes,
                                                   std::int64_t padded_classes,
                                                   std::int64_t mean_rows) = 0;
  /// add_mean_loss after its checks (one double, one float, rows >= 1).
  virtual void do_add_mean_loss(std::span<const double> loss_sum, std::int64_t rows,
                                std::span<float> total) = 0;
  /// cross_entropy_add_forward_backward after its checks: the sum is added on the device.
  virtual void do_cross_entropy_add_forward_backward(
      std::span<const float> logits, std::span<const std::int64_t> labels, std::span<float> dlogits,
      std::int64_t rows, std::int64_t classes, std::int64_t padded_classes, std::int64_t mean_rows,
      std::span<double> loss_sum) = 0;
  /// embedding_forward after its checks; the tokens' range is the device's to check.
  virtual void do_embedding_forward(std::span<const std::int64_t> tokens,
                                    std::span<const float> wte, std::span<const float> wpe,
                                    std::span<float> x, std::int64_t batch, std::int64_t seq_len,
                                    std::int64_t channels, std::int64_t vocab) = 0;
  /// embedding_backward after its checks; the tokens' range is the device's to check.
  virtual void do_embedding_backward(std::span<const std::int64_t> tokens,
                                     std::span<const float> dx, std::span<float> dwte,
                                     std::span<float> dwpe, std::int64_t batch,
                                     std::int64_t seq_len, std::int64_t channels,
                                     std::int64_t vocab) = 0;
  /// layernorm_forward after its checks.
  virtual void do_layernorm_forward(std::span<const float> x, std::span<const float> weight,
                                    std::span<const float> bias, std::span<float> y,
                                    std::span<float> mean, std::span<float> rstd, std::int64_t rows,
                                    std::int64_t channels) = 0;
  /// layernorm_backward after its checks.
  virtual void do_layernorm_backward(std::span<const float> x, std::span<const float> weight,
                                     std::span<const float> mean, std::span<const float> rstd,
                                     std::span<const float> dy, std::span<float> dx,
                                     std::span<float> dweight, std::span<float> dbias,
                                     std::int64_t rows, std::int64_t channels) = 0;
  /// conv1d_forward after its checks.
  virtual void do_conv1d_forward(std::span<const float> x, std::span<const float> w,
                                 std::span<const float> b, std::span<float> y, std::int64_t rows,
                                 std::int64_t in, std::int64_t out) = 0;
  /// conv1d_backward after its checks.
  virtual void do_conv1d_backward(std::span<const float> x, std::span<const float> w,
                                  std::span<const float> dy, std::span<float> dw,
                                  std::span<float> db, std::span<float> dx, std::int64_t rows,
                                  std::int64_t in, std::int64_t out) = 0;
  /// gelu_tanh_forward after its checks.
  virtual void do_gelu_tanh_forward(std::span<const float> x, std::span<float> y) = 0;
  /// gelu_tanh_backward after its checks.
  virtual void do_gelu_tanh_backward(std::span<const float> x, std::span<const float> dy,
                                     std::span<float> dx) = 0;
  /// attention_forward after its checks (heads >= 1 divide the channels; batch and seq_len are
  /// not 0: with nothing to compute, attention_forward returns before it).
  virtual void do_attention_forward(std::span<const float> qkv, std::span<float> stats,
                                    std::span<float> out, std::int64_t batch, std::int64_t seq_len,
                                    std::int64_t channels, std::int64_t heads) = 0;
  /// attention_backward after its checks (heads >= 1 divide the channels; batch and seq_len are
  /// not 0).
  virtual void do_attention_backward(std::span<const float> qkv, std::span<const float> stats,
                                     std::span<const float> out, std::span<const float> dout,
                                     std::span<float> dqkv, std::int64_t batch,
                                     std::int64_t seq_len, std::int64_t channels,
                                     std::int64_t heads) = 0;

  // ---- the kernels with a 16-bit TensorIn or TensorOut (the fp32 ones call the do_ kernels
  // above). The defaults (device_typed.cpp) widen each 16-bit input into fp32 scratch, run the
  // fp32 kernel, and round a 16-bit output from fp32 scratch, with the device's convert; a device
  // that reads and writes 16 bits itself overrides them with the same bits ----

  /// linear_forward with a 16-bit tensor.
  virtual void do_linear_forward_typed(TensorIn x, TensorIn w, TensorIn b, TensorOut y,
                                       std::int64_t rows, std::int64_t in, std::int64_t out);
  /// linear_backward with a 16-bit tensor.
  virtual void do_linear_backward_typed(TensorIn x, TensorIn w, TensorIn dy, std::span<float> dw,
                                        std::span<float> db, std::span<float> dx, std::int64_t rows,
                                        std::int64_t in, std::int64_t out);
  /// embedding_forward with 16-bit tables.
  virtual void do_embedding_forward_typed(std::span<const std::int64_t> tokens, TensorIn wte,
                                          TensorIn wpe, std::span<float> x, std::int64_t batch,
                                          std::int64_t seq_len, std::int64_t channels,
                                          std::int64_t vocab);
  /// layernorm_forward with a 16-bit tensor.
  virtual void do_layernorm_forward_typed(std::span<const float> x, TensorIn weight, TensorIn bias,
                                          TensorOut y, std::span<float> mean, std::span<float> rstd,
                                          std::int64_t rows, std::int64_t channels);
  /// layernorm_backward with a 16-bit weight.
  virtual void do_layernorm_backward_typed(std::span<const float> x, TensorIn weight,
                                           std::span<const float> mean, std::span<const float> rstd,
                                           std::span<const float> dy, std::span<float> dx,
                                           std::span<float> dweight, std::span<float> dbias,
                                           std::int64_t rows, std::int64_t channels);
  /// conv1d_forward with a 16-bit tensor.
  virtual void do_conv1d_forward_typed(TensorIn x, TensorIn w, TensorIn b, TensorOut y,
                                       std::int64_t rows, std::int64_t in, std::int64_t out);
  /// conv1d_backward with a 16-bit tensor.
  virtual void do_conv1d_backward_typed(TensorIn x, TensorIn w, std::span<const float> dy,
                                        std::span<float> dw, std::span<float> db,
                                        std::span<float> dx, std::int64_t rows, std::int64_t in,
                                        std::int64_t out);
  /// gelu_tanh_forward with a 16-bit tensor.
  virtual void do_gelu_tanh_forward_typed(TensorIn x, TensorOut y);
  /// gelu_tanh_backward with a 16-bit x.
  virtual void do_gelu_tanh_backward_typed(TensorIn x, std::span<const float> dy,
                                           std::span<float> dx);
  /// attention_forward with a 16-bit tensor.
  virtual void do_attention_forward_typed(TensorIn qkv, std::span<float> stats, TensorOut out,
                                          std::int64_t batch, std::int64_t seq_len,
                                          std::int64_t channels, std::int64_t heads);
  /// cross_entropy_add_forward_backward with a 16-bit tensor, grad_scale applied.
  virtual void do_cross_entropy_add_forward_backward_typed(
      TensorIn logits, std::span<const std::int64_t> labels, TensorOut dlogits, std::int64_t rows,
      std::int64_t classes, std::int64_t padded_classes, std::int64_t mean_rows,
      std::span<double> loss_sum, float grad_scale);
  /// attention_backward with a 16-bit tensor.
  virtual void do_attention_backward_typed(TensorIn qkv, std::span<const float> stats, TensorIn out,
                                           std::span<const float> dout, std::span<float> dqkv,
                                           std::int64_t batch, std::int64_t seq_len,
                                           std::int64_t channels, std::int64_t heads);

  /// `in`'s values in fp32: `in` itself when it is fp32, else widened into scratch slot `slot`
  /// (0..kScratchSlots-1), which holds it until the slot is used again.
  std::span<const float> widened(TensorIn in, int slot);
  /// Where a kernel writes `out`'s values in fp32: `out` itself when it is fp32, else scratch slot
  /// `slot`; store_fp32() then rounds them into `out`.
  std::span<float> fp32_target(TensorOut out, int slot);
  /// Rounds `computed` (what fp32_target gave) into `out` when `out` is 16-bit; else nothing.
  void store_fp32(std::span<const float> computed, TensorOut out);
  /// Bytes of the fp32 scratch widened() and fp32_target() hold: the device's own working memory,
  /// not booked in ledger() (a GPU's memory check counts it as internal).
  std::int64_t typed_scratch_bytes() const { return scratch_ledger_.total_current_bytes(); }
  /// Frees the scratch; each device's destructor calls it while the device can still free.
  void release_typed_scratch();

  /// Counts one host wait (host_waits()) that blocked the host for `waited_ms` (host_wait_ms());
  /// a device calls it wherever the host waits for it.
  void count_host_wait(double waited_ms) {
    ++host_waits_;
    host_wait_ms_ += waited_ms;
  }

  /// Scratch slots of widened() and fp32_target().
  static constexpr int kScratchSlots = 4;

 private:
  MemoryLedger ledger_;
  MemoryLedger scratch_ledger_;                // typed_scratch_bytes()
  std::array<Buffer, kScratchSlots> scratch_;  // widened(), fp32_target()

  // Scratch slot `slot` as `elems` floats, grown (never shrunk) on demand.
  std::span<float> scratch_f32(int slot, std::int64_t elems);
  std::int64_t host_waits_ = 0;  // host_waits()
  double host_wait_ms_ = 0.0;    // host_wait_ms()
};

}  // namespace zl
