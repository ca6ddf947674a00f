// device.cpp — the Device kernels' argument checks, run once for every device: each span has the
// elements its shapes need (check_elems.hpp), a loss has rows and classes, attention's heads
// split the channels. Then the device's do_ implementation runs (cpu/, cuda/).
#include "ops/device.hpp"

#include "core/error.hpp"
#include "ops/check_elems.hpp"

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

}  // namespace

void Device::adamw_update_rounded(std::span<float> master, std::span<const float> grads,
                                  std::span<float> exp_avg, std::span<float> exp_avg_sq,
                                  const AdamWScalars& scalars, void* rounded, DType rounded_dtype) {
  adamw_update(master, grads, exp_avg, exp_avg_sq, scalars);
  convert(master.data(), DType::F32, rounded, rounded_dtype,
          static_cast<std::int64_t>(master.size()));
}

void Device::linear_forward(std::span<const float> x, std::span<const float> w,
                            std::span<const float> b, std::span<float> y, std::int64_t rows,
                            std::int64_t in, std::int64_t out) {
  check_elems("linear_forward", "x", x.size(), rows * in);
  check_elems("linear_forward", "w", w.size(), out * in);
  if (!b.empty()) check_elems("linear_forward", "b", b.size(), out);
  check_elems("linear_forward", "y", y.size(), rows * out);
  do_linear_forward(x, w, b, y, rows, in, out);
}

void Device::linear_backward(std::span<const float> x, std::span<const float> w,
                             std::span<const float> dy, std::span<float> dw, std::span<float> db,
                             std::span<float> dx, std::int64_t rows, std::int64_t in,
                             std::int64_t out) {
  check_elems("linear_backward", "x", x.size(), rows * in);
  check_elems("linear_backward", "w", w.size(), out * in);
  check_elems("linear_backward", "dy", dy.size(), rows * out);
  check_elems("linear_backward", "dw", dw.size(), out * in);
  if (!db.empty()) check_elems("linear_backward", "db", db.size(), out);
  if (!dx.empty()) check_elems("linear_backward", "dx", dx.size(), rows * in);
  do_linear_backward(x, w, dy, dw, db, dx, rows, in, out);
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

void Device::cross_entropy_add_forward_backward(std::span<const float> logits,
                                                std::span<const std::int64_t> labels,
                                                std::span<float> dlogits, std::int64_t rows,
                                                std::int64_t classes, std::int64_t padded_classes,
                                                std::int64_t mean_rows,
                                                std::span<double> loss_sum) {
  check_elems("cross_entropy", "loss_sum", loss_sum.size(), 1);
  check_cross_entropy(logits.size(), labels.size(), dlogits.size(), rows, classes, padded_classes,
                      mean_rows);
  do_cross_entropy_add_forward_backward(logits, labels, dlogits, rows, classes, padded_classes,
                                        mean_rows, loss_sum);
}

void Device::embedding_forward(std::span<const std::int64_t> tokens, std::span<const float> wte,
                               std::span<const float> wpe, std::span<float> x, std::int64_t batch,
                               std::int64_t seq_len, std::int64_t channels, std::int64_t vocab) {
  check_elems("embedding_forward", "tokens", tokens.size(), batch * seq_len);
  check_elems("embedding_forward", "wte", wte.size(), vocab * channels);
  check_elems("embedding_forward", "wpe", wpe.size(), seq_len * channels);
  check_elems("embedding_forward", "x", x.size(), batch * seq_len * channels);
  do_embedding_forward(tokens, wte, wpe, x, batch, seq_len, channels, vocab);
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

void Device::layernorm_forward(std::span<const float> x, std::span<const float> weight,
                               std::span<const float> bias, std::span<float> y,
                               std::span<float> mean, std::span<float> rstd, std::int64_t rows,
                               std::int64_t channels) {
  check_elems("layernorm_forward", "x", x.size(), rows * channels);
  check_elems("layernorm_forward", "weight", weight.size(), channels);
  check_elems("layernorm_forward", "bias", bias.size(), channels);
  check_elems("layernorm_forward", "y", y.size(), rows * channels);
  check_elems("layernorm_forward", "mean", mean.size(), rows);
  check_elems("layernorm_forward", "rstd", rstd.size(), rows);
  do_layernorm_forward(x, weight, bias, y, mean, rstd, rows, channels);
}

void Device::layernorm_backward(std::span<const float> x, std::span<const float> weight,
                                std::span<const float> mean, std::span<const float> rstd,
                                std::span<const float> dy, std::span<float> dx,
                                std::span<float> dweight, std::span<float> dbias, std::int64_t rows,
                                std::int64_t channels) {
  check_elems("layernorm_backward", "x", x.size(), rows * channels);
  check_elems("layernorm_backward", "weight", weight.size(), channels);
  check_elems("layernorm_backward", "mean", mean.size(), rows);
  check_elems("layernorm_backward", "rstd", rstd.size(), rows);
  check_elems("layernorm_backward", "dy", dy.size(), rows * channels);
  check_elems("layernorm_backward", "dx", dx.size(), rows * channels);
  check_elems("layernorm_backward", "dweight", dweight.size(), channels);
  check_elems("layernorm_backward", "dbias", dbias.size(), channels);
  do_layernorm_backward(x, weight, mean, rstd, dy, dx, dweight, dbias, rows, channels);
}

void Device::conv1d_forward(std::span<const float> x, std::span<const float> w,
                            std::span<const float> b, std::span<float> y, std::int64_t rows,
                            std::int64_t in, std::int64_t out) {
  check_elems("conv1d_forward", "x", x.size(), rows * in);
  check_elems("conv1d_forward", "w", w.size(), in * out);
  check_elems("conv1d_forward", "b", b.size(), out);
  check_elems("conv1d_forward", "y", y.size(), rows * out);
  do_conv1d_forward(x, w, b, y, rows, in, out);
}

void Device::conv1d_backward(std::span<const float> x, std::span<const float> w,
                             std::span<const float> dy, std::span<float> dw, std::span<float> db,
                             std::span<float> dx, std::int64_t rows, std::int64_t in,
                             std::int64_t out) {
  check_elems("conv1d_backward", "x", x.size(), rows * in);
  check_elems("conv1d_backward", "w", w.size(), in * out);
  check_elems("conv1d_backward", "dy", dy.size(), rows * out);
  check_elems("conv1d_backward", "dw", dw.size(), in * out);
  check_elems("conv1d_backward", "db", db.size(), out);
  if (!dx.empty()) check_elems("conv1d_backward", "dx", dx.size(), rows * in);
  do_conv1d_backward(x, w, dy, dw, db, dx, rows, in, out);
}

void Device::gelu_tanh_forward(std::span<const float> x, std::span<float> y) {
  check_elems("gelu_tanh_forward", "y", y.size(), static_cast<std::int64_t>(x.size()));
  do_gelu_tanh_forward(x, y);
}

void Device::gelu_tanh_backward(std::span<const float> x, std::span<const float> dy,
                                std::span<float> dx) {
  check_elems("gelu_tanh_backward", "dy", dy.size(), static_cast<std::int64_t>(x.size()));
  check_elems("gelu_tanh_backward", "dx", dx.size(), static_cast<std::int64_t>(x.size()));
  do_gelu_tanh_backward(x, dy, dx);
}

void Device::attention_forward(std::span<const float> qkv, std::span<float> stats,
                               std::span<float> out, std::int64_t batch, std::int64_t seq_len,
                               std::int64_t channels, std::int64_t heads) {
  check_heads("attention_forward", channels, heads);
  const std::int64_t T = seq_len, C = channels;
  check_elems("attention_forward", "qkv", qkv.size(), batch * T * 3 * C);
  check_elems("attention_forward", "stats", stats.size(),
              batch * heads * T * kAttentionStatsPerRow);
  check_elems("attention_forward", "out", out.size(), batch * T * C);
  if (batch * T == 0) return;
  do_attention_forward(qkv, stats, out, batch, seq_len, channels, heads);
}

void Device::attention_backward(std::span<const float> qkv, std::span<const float> stats,
                                std::span<const float> out, std::span<const float> dout,
                                std::span<float> dqkv, std::int64_t batch, std::int64_t seq_len,
                                std::int64_t channels, std::int64_t heads) {
  check_heads("attention_backward", channels, heads);
  const std::int64_t T = seq_len, C = channels;
  check_elems("attention_backward", "qkv", qkv.size(), batch * T * 3 * C);
  check_elems("attention_backward", "stats", stats.size(),
              batch * heads * T * kAttentionStatsPerRow);
  check_elems("attention_backward", "out", out.size(), batch * T * C);
  check_elems("attention_backward", "dout", dout.size(), batch * T * C);
  check_elems("attention_backward", "dqkv", dqkv.size(), batch * T * 3 * C);
  if (batch * T == 0) return;
  do_attention_backward(qkv, stats, out, dout, dqkv, batch, seq_len, channels, heads);
}

}  // namespace zl
