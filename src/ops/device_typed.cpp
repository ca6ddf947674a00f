// device_typed.cpp — the Device kernels' default for 16-bit tensors: each 16-bit input widened
// into fp32 scratch, the fp32 kernel run, a 16-bit output rounded from fp32 scratch, all with the
// device's own convert. The bits are the fp32 kernel's on the widened values, which a device that
// reads and writes 16 bits itself (cuda/) must match.
#include "ops/device.hpp"

namespace zl {

std::span<float> Device::scratch_f32(int slot, std::int64_t elems) {
  ZL_CHECK(slot >= 0 && slot < kScratchSlots, "scratch slot {} of {}", slot, kScratchSlots);
  Buffer& scratch = scratch_[static_cast<std::size_t>(slot)];
  if (scratch.elems() < elems) {
    scratch = Buffer();  // freed before the larger one is made
    scratch = Buffer(*this, scratch_ledger_, MemCategory::Activations, DType::F32, {elems});
  }
  return scratch.as<float>().first(static_cast<std::size_t>(elems));
}

std::span<const float> Device::widened(TensorIn in, int slot) {
  if (in.dtype == DType::F32) return in.f32();
  const std::span<float> fp32 = scratch_f32(slot, in.elems);
  convert(in.data, in.dtype, fp32.data(), DType::F32, in.elems);
  return fp32;
}

std::span<float> Device::fp32_target(TensorOut out, int slot) {
  return out.dtype == DType::F32 ? out.f32() : scratch_f32(slot, out.elems);
}

void Device::store_fp32(std::span<const float> computed, TensorOut out) {
  if (out.dtype == DType::F32) return;
  convert(computed.data(), DType::F32, out.data, out.dtype, out.elems);
}

void Device::release_typed_scratch() {
  for (Buffer& scratch : scratch_) scratch = Buffer();
}

void Device::do_linear_forward_typed(TensorIn x, TensorIn w, TensorIn b, TensorOut y,
                                     std::int64_t rows, std::int64_t in, std::int64_t out) {
  const std::span<float> y32 = fp32_target(y, 3);
  do_linear_forward(widened(x, 0), widened(w, 1), widened(b, 2), y32, rows, in, out);
  store_fp32(y32, y);
}

void Device::do_linear_backward_typed(TensorIn x, TensorIn w, TensorIn dy, std::span<float> dw,
                                      std::span<float> db, std::span<float> dx, std::int64_t rows,
                                      std::int64_t in, std::int64_t out) {
  do_linear_backward(widened(x, 0), widened(w, 1), widened(dy, 2), dw, db, dx, rows, in, out);
}

void Device::do_cross_entropy_add_forward_backward_typed(
    TensorIn logits, std::span<const std::int64_t> labels, TensorOut dlogits, std::int64_t rows,
    std::int64_t classes, std::int64_t padded_classes, std::int64_t mean_rows,
    std::span<double> loss_sum, float grad_scale) {
  // Widened before anything is written: dlogits may be logits itself.
  const std::span<const float> logits32 = widened(logits, 0);
  const std::span<float> dlogits32 = fp32_target(dlogits, 1);
  do_cross_entropy_add_forward_backward(logits32, labels, dlogits32, rows, classes, padded_classes,
                                        mean_rows, loss_sum);
  if (grad_scale != 1.0f) scale(dlogits32, grad_scale);
  store_fp32(dlogits32, dlogits);
}

void Device::do_embedding_forward_typed(std::span<const std::int64_t> tokens, TensorIn wte,
                                        TensorIn wpe, std::span<float> x, std::int64_t batch,
                                        std::int64_t seq_len, std::int64_t channels,
                                        std::int64_t vocab) {
  do_embedding_forward(tokens, widened(wte, 0), widened(wpe, 1), x, batch, seq_len, channels,
                       vocab);
}

void Device::do_layernorm_forward_typed(std::span<const float> x, TensorIn weight, TensorIn bias,
                                        TensorOut y, std::span<float> mean, std::span<float> rstd,
                                        std::int64_t rows, std::int64_t channels) {
  const std::span<float> y32 = fp32_target(y, 0);
  do_layernorm_forward(x, widened(weight, 1), widened(bias, 2), y32, mean, rstd, rows, channels);
  store_fp32(y32, y);
}

void Device::do_layernorm_backward_typed(std::span<const float> x, TensorIn weight,
                                         std::span<const float> mean, std::span<const float> rstd,
                                         std::span<const float> dy, std::span<float> dx,
                                         std::span<float> dweight, std::span<float> dbias,
                                         std::int64_t rows, std::int64_t channels) {
  do_layernorm_backward(x, widened(weight, 0), mean, rstd, dy, dx, dweight, dbias, rows, channels);
}

void Device::do_conv1d_forward_typed(TensorIn x, TensorIn w, TensorIn b, TensorOut y,
                                     std::int64_t rows, std::int64_t in, std::int64_t out) {
  const std::span<float> y32 = fp32_target(y, 3);
  do_conv1d_forward(widened(x, 0), widened(w, 1), widened(b, 2), y32, rows, in, out);
  store_fp32(y32, y);
}

void Device::do_conv1d_backward_typed(TensorIn x, TensorIn w, std::span<const float> dy,
                                      std::span<float> dw, std::span<float> db, std::span<float> dx,
                                      std::int64_t rows, std::int64_t in, std::int64_t out) {
  do_conv1d_backward(widened(x, 0), widened(w, 1), dy, dw, db, dx, rows, in, out);
}

void Device::do_gelu_tanh_forward_typed(TensorIn x, TensorOut y) {
  const std::span<float> y32 = fp32_target(y, 1);
  do_gelu_tanh_forward(widened(x, 0), y32);
  store_fp32(y32, y);
}

void Device::do_gelu_tanh_backward_typed(TensorIn x, std::span<const float> dy,
                                         std::span<float> dx) {
  do_gelu_tanh_backward(widened(x, 0), dy, dx);
}

void Device::do_attention_forward_typed(TensorIn qkv, std::span<float> stats, TensorOut out,
                                        std::int64_t batch, std::int64_t seq_len,
                                        std::int64_t channels, std::int64_t heads) {
  const std::span<float> out32 = fp32_target(out, 1);
  do_attention_forward(widened(qkv, 0), stats, out32, batch, seq_len, channels, heads);
  store_fp32(out32, out);
}

void Device::do_attention_backward_typed(TensorIn qkv, std::span<const float> stats, TensorIn out,
                                         std::span<const float> dout, std::span<float> dqkv,
                                         std::int64_t batch, std::int64_t seq_len,
                                         std::int64_t channels, std::int64_t heads) {
  do_attention_backward(widened(qkv, 0), stats, widened(out, 1), dout, dqkv, batch, seq_len,
                        channels, heads);
}

}  // namespace zl
