// device.cpp — the Device kernels' argument checks, run once for every device: each span has the
// elements its shapes need (check_elems.hpp), a loss has rows and classes, attention's heads
// split the channels. Then the device's do_ implementation runs (cpu/, cuda/).
#include "ops/device.hpp"

#include <initializer_list>

#include "core/error.hpp"
#include "ops/check_elems.hpp"
#include "optim/grad_norm.hpp"

namespace zl {

namespace {

// Attention's shape check, shared by forward and backward.
void check_heads(const char* kernel, std::int64_t channels, std::int64_t heads) {
  ZL_CHECK(heads >= 1 && channels % heads == 0,
           "{}: {} channels do not split into {} heads: use a multiple of the head count", kernel,
           channels, heads);
}

// The arguments of a cross-entropy over `rows` rows of a batch of `mean_rows`, by their sizes.
void check_cross_entropy(std::size_t logits, std::size_t labels, std::size_t dlogits,
                         std::int64_t rows, std::int64_t classes, std::int64_t padded_classes,
                         std::int64_t mean_rows) {
  ZL_CHECK(classes >= 1, "cross_entropy: {} classes is invalid; pass >= 1 class", classes);
  ZL_CHECK(padded_classes >= classes,
           "cross_entropy: rows of {} columns cannot hold {} classes; pass padded_classes >= "
           "classes",
           padded_classes, classes);
  check_elems("cross_entropy", "logits", logits, rows * padded_classes);
  check_elems("cross_entropy", "labels", labels, rows);
  check_elems("cross_entropy", "dlogits", dlogits, rows * padded_classes);
  ZL_CHECK(rows >= 1 && rows <= mean_rows,
           "cross_entropy: a chunk of {} rows of a batch of {}: pass 1 <= rows <= the batch's rows",
           rows, mean_rows);
}

// Throws zl::Error unless a kernel's typed argument `what` is fp32, bf16 or fp16.
void check_dtype(const char* kernel, const char* what, DType dtype) {
  ZL_CHECK(is_training_dtype(dtype), "{}: {} is {}; kernels take fp32, bf16 or fp16", kernel, what,
           dtype_name(dtype));
}

// check_dtype, and the elements its shapes need.
void check_tensor(const char* kernel, const char* what, TensorIn tensor,
                  std::int64_t expected_elems) {
  check_dtype(kernel, what, tensor.dtype);
  check_elems(kernel, what, static_cast<std::size_t>(tensor.elems), expected_elems);
}

// Throws zl::Error unless two tensors a kernel reads together (a unit's two tables, a weight and
// its bias) have one dtype.
void check_same_dtype(const char* kernel, const char* what, TensorIn tensor, const char* other,
                      TensorIn other_tensor) {
  ZL_CHECK(tensor.dtype == other_tensor.dtype, "{}: {} is {} but {} is {}; pass both in one dtype",
           kernel, what, dtype_name(tensor.dtype), other, dtype_name(other_tensor.dtype));
}

// Throws zl::Error unless a loss scale to divide by is a positive number.
void check_divisor(const char* kernel, float divisor) {
  ZL_CHECK(divisor > 0.0f, "{}: a gradient divided by {}: pass the loss scale, > 0", kernel,
           divisor);
}

// True when every tensor is fp32: the call goes to the fp32 do_ kernel.
bool all_f32(std::initializer_list<TensorIn> tensors) {
  for (const TensorIn& tensor : tensors)
    if (tensor.dtype != DType::F32) return false;
  return true;
}

}  // namespace

void Device::adamw_update_rounded(std::span<float> master, std::span<const float> grads,
                                  std::span<float> exp_avg, std::span<float> exp_avg_sq,
                                  const AdamWScalars& scalars, void* rounded, DType rounded_dtype) {
  adamw_update(master, grads, exp_avg, exp_avg_sq, scalars);
  convert(master.data(), DType::F32, rounded, rounded_dtype,
          static_cast<std::int64_t>(master.size()));
}

void Device::tree_cover_sums(std::span<const double> leaves, std::int64_t first_leaf,
                             std::span<double> sums) {
  ZL_CHECK(first_leaf >= 0, "tree_cover_sums: first leaf {} is negative", first_leaf);
  const std::size_t nodes = tree_cover(first_leaf, std::ssize(leaves)).size();
  ZL_CHECK(sums.size() == nodes,
           "tree_cover_sums: {} sums for the {} nodes covering {} leaves from {}: pass one per "
           "node",
           sums.size(), nodes, leaves.size(), first_leaf);
  do_tree_cover_sums(leaves, first_leaf, sums);
}

void Device::block_sumsq_unscaled(TensorIn grads, float divisor, std::span<double> partials) {
  check_dtype("block_sumsq_unscaled", "grads", grads.dtype);
  check_block_sumsq(static_cast<std::size_t>(grads.elems), partials.size());
  check_divisor("block_sumsq_unscaled", divisor);
  do_block_sumsq_unscaled(grads, divisor, partials);
}

void Device::adamw_update_unscaled(std::span<float> master, TensorIn grads, float divisor,
                                   float clip, std::span<float> exp_avg,
                                   std::span<float> exp_avg_sq, const AdamWScalars& scalars,
                                   void* rounded, DType rounded_dtype) {
  check_dtype("adamw_update_unscaled", "grads", grads.dtype);
  const auto elems = static_cast<std::int64_t>(master.size());
  check_elems("adamw_update_unscaled", "grads", static_cast<std::size_t>(grads.elems), elems);
  check_elems("adamw_update_unscaled", "exp_avg", exp_avg.size(), elems);
  check_elems("adamw_update_unscaled", "exp_avg_sq", exp_avg_sq.size(), elems);
  check_divisor("adamw_update_unscaled", divisor);
  if (rounded != nullptr) check_dtype("adamw_update_unscaled", "the master's copy", rounded_dtype);
  do_adamw_update_unscaled(master, grads, divisor, clip, exp_avg, exp_avg_sq, scalars, rounded,
                           rounded_dtype);
}

void Device::linear_forward(TensorIn x, TensorIn w, TensorIn b, TensorOut y, std::int64_t rows,
                            std::int64_t in, std::int64_t out) {
  check_tensor("linear_forward", "x", x, rows * in);
  check_tensor("linear_forward", "w", w, out * in);
  if (!b.empty()) check_tensor("linear_forward", "b", b, out);
  check_tensor("linear_forward", "y", y, rows * out);
  if (!all_f32({x, w, b, y})) {
    return do_linear_forward_typed(x, w, b, y, rows, in, out);
  }
  do_linear_forward(x.f32(), w.f32(), b.f32(), y.f32(), rows, in, out);
}

void Device::linear_backward(TensorIn x, TensorIn w, TensorIn dy, std::span<float> dw,
                             std::span<float> db, std::span<float> dx, std::int64_t rows,
                             std::int64_t in, std::int64_t out) {
  check_tensor("linear_backward", "x", x, rows * in);
  check_tensor("linear_backward", "w", w, out * in);
  check_tensor("linear_backward", "dy", dy, rows * out);
  check_elems("linear_backward", "dw", dw.size(), out * in);
  if (!db.empty()) check_elems("linear_backward", "db", db.size(), out);
  if (!dx.empty()) check_elems("linear_backward", "dx", dx.size(), rows * in);
  if (!all_f32({x, w, dy})) {
    return do_linear_backward_typed(x, w, dy, dw, db, dx, rows, in, out);
  }
  do_linear_backward(x.f32(), w.f32(), dy.f32(), dw, db, dx, rows, in, out);
}

void Device::gelu_forward(std::span<const float> x, std::span<float> y) {
  check_elems("gelu_forward", "y", y.size(), static_cast<std::int64_t>(x.size()));
  do_gelu_forward(x, y);
}

void Device::gelu_backward(std::span<const float> x, std::span<const float> dy,
                           std::span<float> dx) {
  check_elems("gelu_backward", "dy", dy.size(), static_cast<std::int64_t>(x.size()));
  check_elems("gelu_backward", "dx", dx.size(), static_cast<std::int64_t>(x.size()));
  do_gelu_backward(x, dy, dx);
}

float Device::cross_entropy_forward_backward(std::span<const float> logits,
                                             std::span<const std::int64_t> labels,
                                             std::span<float> dlogits, std::int64_t rows,
                                             std::int64_t classes, std::int64_t padded_classes) {
  ZL_CHECK(rows >= 1, "cross_entropy: a batch of {} rows has no mean loss; pass >= 1 row", rows);
  return static_cast<float>(cross_entropy_sum_forward_backward(logits, labels, dlogits, rows,
                                                               classes, padded_classes, rows) /
                            static_cast<double>(rows));
}

double Device::cross_entropy_sum_forward_backward(std::span<const float> logits,
                                                  std::span<const std::int64_t> labels,
                                                  std::span<float> dlogits, std::int64_t rows,
                                                  std::int64_t classes, std::int64_t padded_classes,
                                                  std::int64_t mean_rows) {
  check_cross_entropy(logits.size(), labels.size(), dlogits.size(), rows, classes, padded_classes,
                      mean_rows);
  return do_cross_entropy_forward_backward(logits, labels, dlogits, rows, classes, padded_classes,
                                           mean_rows);
}

void Device::cross_entropy_add_forward_backward(TensorIn logits,
                                                std::span<const std::int64_t> labels,
                                                TensorOut dlogits, std::int64_t rows,
                                                std::int64_t classes, std::int64_t padded_classes,
                                                std::int64_t mean_rows, std::span<double> loss_sum,
                                                float grad_scale) {
  check_elems("cross_entropy", "loss_sum", loss_sum.size(), 1);
  check_dtype("cross_entropy", "logits", logits.dtype);
  check_dtype("cross_entropy", "dlogits", dlogits.dtype);
  check_cross_entropy(static_cast<std::size_t>(logits.elems), labels.size(),
                      static_cast<std::size_t>(dlogits.elems), rows, classes, padded_classes,
                      mean_rows);
  ZL_CHECK(logits.data != dlogits.data || logits.dtype == dlogits.dtype,
           "cross_entropy: dlogits written over logits of another dtype ({} over {}): pass one "
           "dtype",
           dtype_name(dlogits.dtype), dtype_name(logits.dtype));
  if (!all_f32({logits, dlogits})) {
    return do_cross_entropy_add_forward_backward_typed(
        logits, labels, dlogits, rows, classes, padded_classes, mean_rows, loss_sum, grad_scale);
  }
  do_cross_entropy_add_forward_backward(logits.f32(), labels, dlogits.f32(), rows, classes,
                                        padded_classes, mean_rows, loss_sum);
  if (grad_scale != 1.0f) scale(dlogits.f32(), grad_scale);
}

void Device::add_mean_loss(std::span<const double> loss_sum, std::int64_t rows,
                           std::span<float> total) {
  check_elems("add_mean_loss", "loss_sum", loss_sum.size(), 1);
  check_elems("add_mean_loss", "total", total.size(), 1);
  ZL_CHECK(rows >= 1, "add_mean_loss: a mean over {} rows: pass >= 1 row", rows);
  do_add_mean_loss(loss_sum, rows, total);
}

float Device::read_mean_loss(std::span<const double> loss_sum, std::int64_t rows) {
  check_elems("read_mean_loss", "loss_sum", loss_sum.size(), 1);
  ZL_CHECK(rows >= 1, "read_mean_loss: a mean over {} rows: pass >= 1 row", rows);
  double sum = 0.0;
  copy_to_host(&sum, loss_sum.data(), sizeof(sum));
  return static_cast<float>(sum / static_cast<double>(rows));
}

void Device::embedding_forward(std::span<const std::int64_t> tokens, TensorIn wte, TensorIn wpe,
                               std::span<float> x, std::int64_t batch, std::int64_t seq_len,
                               std::int64_t channels, std::int64_t vocab) {
  check_elems("embedding_forward", "tokens", tokens.size(), batch * seq_len);
  check_tensor("embedding_forward", "wte", wte, vocab * channels);
  check_tensor("embedding_forward", "wpe", wpe, seq_len * channels);
  check_same_dtype("embedding_forward", "wte", wte, "wpe", wpe);
  check_elems("embedding_forward", "x", x.size(), batch * seq_len * channels);
  if (!all_f32({wte, wpe})) {
    return do_embedding_forward_typed(tokens, wte, wpe, x, batch, seq_len, channels, vocab);
  }
  do_embedding_forward(tokens, wte.f32(), wpe.f32(), x, batch, seq_len, channels, vocab);
}

void Device::embedding_backward(std::span<const std::int64_t> tokens, std::span<const float> dx,
                                std::span<float> dwte, std::span<float> dwpe, std::int64_t batch,
                                std::int64_t seq_len, std::int64_t channels, std::int64_t vocab) {
  check_elems("embedding_backward", "tokens", tokens.size(), batch * seq_len);
  check_elems("embedding_backward", "dx", dx.size(), batch * seq_len * channels);
  check_elems("embedding_backward", "dwte", dwte.size(), vocab * channels);
  check_elems("embedding_backward", "dwpe", dwpe.size(), seq_len * channels);
  do_embedding_backward(tokens, dx, dwte, dwpe, batch, seq_len, channels, vocab);
}

void Device::layernorm_forward(std::span<const float> x, TensorIn weight, TensorIn bias,
                               TensorOut y, std::span<float> mean, std::span<float> rstd,
                               std::int64_t rows, std::int64_t channels) {
  check_elems("layernorm_forward", "x", x.size(), rows * channels);
  check_tensor("layernorm_forward", "weight", weight, channels);
  check_tensor("layernorm_forward", "bias", bias, channels);
  check_same_dtype("layernorm_forward", "weight", weight, "bias", bias);
  check_tensor("layernorm_forward", "y", y, rows * channels);
  check_elems("layernorm_forward", "mean", mean.size(), rows);
  check_elems("layernorm_forward", "rstd", rstd.size(), rows);
  if (!all_f32({weight, y})) {
    return do_layernorm_forward_typed(x, weight, bias, y, mean, rstd, rows, channels);
  }
  do_layernorm_forward(x, weight.f32(), bias.f32(), y.f32(), mean, rstd, rows, channels);
}

void Device::layernorm_backward(std::span<const float> x, TensorIn weight,
                                std::span<const float> mean, std::span<const float> rstd,
                                std::span<const float> dy, std::span<float> dx,
                                std::span<float> dweight, std::span<float> dbias, std::int64_t rows,
                                std::int64_t channels) {
  check_elems("layernorm_backward", "x", x.size(), rows * channels);
  check_tensor("layernorm_backward", "weight", weight, channels);
  check_elems("layernorm_backward", "mean", mean.size(), rows);
  check_elems("layernorm_backward", "rstd", rstd.size(), rows);
  check_elems("layernorm_backward", "dy", dy.size(), rows * channels);
  check_elems("layernorm_backward", "dx", dx.size(), rows * channels);
  check_elems("layernorm_backward", "dweight", dweight.size(), channels);
  check_elems("layernorm_backward", "dbias", dbias.size(), channels);
  if (weight.dtype != DType::F32) {
    return do_layernorm_backward_typed(x, weight, mean, rstd, dy, dx, dweight, dbias, rows,
                                       channels);
  }
  do_layernorm_backward(x, weight.f32(), mean, rstd, dy, dx, dweight, dbias, rows, channels);
}

void Device::conv1d_forward(TensorIn x, TensorIn w, TensorIn b, TensorOut y, std::int64_t rows,
                            std::int64_t in, std::int64_t out) {
  check_tensor("conv1d_forward", "x", x, rows * in);
  check_tensor("conv1d_forward", "w", w, in * out);
  check_tensor("conv1d_forward", "b", b, out);
  check_tensor("conv1d_forward", "y", y, rows * out);
  if (!all_f32({x, w, b, y})) {
    return do_conv1d_forward_typed(x, w, b, y, rows, in, out);
  }
  do_conv1d_forward(x.f32(), w.f32(), b.f32(), y.f32(), rows, in, out);
}

void Device::conv1d_backward(TensorIn x, TensorIn w, std::span<const float> dy, std::span<float> dw,
                             std::span<float> db, std::span<float> dx, std::int64_t rows,
                             std::int64_t in, std::int64_t out) {
  check_tensor("conv1d_backward", "x", x, rows * in);
  check_tensor("conv1d_backward", "w", w, in * out);
  check_elems("conv1d_backward", "dy", dy.size(), rows * out);
  check_elems("conv1d_backward", "dw", dw.size(), in * out);
  check_elems("conv1d_backward", "db", db.size(), out);
  if (!dx.empty()) check_elems("conv1d_backward", "dx", dx.size(), rows * in);
  if (!all_f32({x, w})) {
    return do_conv1d_backward_typed(x, w, dy, dw, db, dx, rows, in, out);
  }
  do_conv1d_backward(x.f32(), w.f32(), dy, dw, db, dx, rows, in, out);
}

void Device::gelu_tanh_forward(TensorIn x, TensorOut y) {
  check_dtype("gelu_tanh_forward", "x", x.dtype);
  check_tensor("gelu_tanh_forward", "y", y, x.elems);
  if (!all_f32({x, y})) return do_gelu_tanh_forward_typed(x, y);
  do_gelu_tanh_forward(x.f32(), y.f32());
}

void Device::gelu_tanh_backward(TensorIn x, std::span<const float> dy, std::span<float> dx) {
  check_dtype("gelu_tanh_backward", "x", x.dtype);
  check_elems("gelu_tanh_backward", "dy", dy.size(), x.elems);
  check_elems("gelu_tanh_backward", "dx", dx.size(), x.elems);
  if (x.dtype != DType::F32) return do_gelu_tanh_backward_typed(x, dy, dx);
  do_gelu_tanh_backward(x.f32(), dy, dx);
}

void Device::attention_forward(TensorIn qkv, std::span<float> stats, TensorOut out,
                               std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                               std::int64_t heads) {
  check_heads("attention_forward", channels, heads);
  const std::int64_t T = seq_len, C = channels;
  check_tensor("attention_forward", "qkv", qkv, batch * T * 3 * C);
  check_elems("attention_forward", "stats", stats.size(),
              batch * heads * T * kAttentionStatsPerRow);
  check_tensor("attention_forward", "out", out, batch * T * C);
  if (batch * T == 0) return;
  if (!all_f32({qkv, out})) {
    return do_attention_forward_typed(qkv, stats, out, batch, seq_len, channels, heads);
  }
  do_attention_forward(qkv.f32(), stats, out.f32(), batch, seq_len, channels, heads);
}

void Device::attention_backward(TensorIn qkv, std::span<const float> stats, TensorIn out,
                                std::span<const float> dout, std::span<float> dqkv,
                                std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                                std::int64_t heads) {
  check_heads("attention_backward", channels, heads);
  const std::int64_t T = seq_len, C = channels;
  check_tensor("attention_backward", "qkv", qkv, batch * T * 3 * C);
  check_elems("attention_backward", "stats", stats.size(),
              batch * heads * T * kAttentionStatsPerRow);
  check_tensor("attention_backward", "out", out, batch * T * C);
  check_elems("attention_backward", "dout", dout.size(), batch * T * C);
  check_elems("attention_backward", "dqkv", dqkv.size(), batch * T * 3 * C);
  if (batch * T == 0) return;
  if (!all_f32({qkv, out})) {
    return do_attention_backward_typed(qkv, stats, out, dout, dqkv, batch, seq_len, channels,
                                       heads);
  }
  do_attention_backward(qkv.f32(), stats, out.f32(), dout, dqkv, batch, seq_len, channels, heads);
}

}  // namespace zl
