// cuda_device_typed.cpp — CudaDevice's kernels on 16-bit tensors (bf16 or fp16). With GEMMs in a
// 16-bit format, an operand in it goes to the tensor cores as it is kept (no conversion) and a
// layer's output in it is rounded once as the bias is added; the embedding, LayerNorm, GELU and
// the loss read and write either format themselves, and the fast attention the format of its tiles
// (attention_tiles): the bits of Device's default (widen, the fp32 kernel, round), with none of its
// conversions. Tensors of two 16-bit formats in one call, attention on tensors in another format
// than its tiles' and the exact attention take that default.
#include "core/error.hpp"
#include "ops/cuda/cuda_device.hpp"
#include "ops/cuda/cuda_kernels.hpp"

namespace zl {

namespace {

// `tensor`'s elements as the kernels take the 16-bit format H (std::uint16_t: bf16, cuda::Fp16).
template <class H>
const H* data_as(TensorIn tensor) {
  return static_cast<const H*>(tensor.data);
}
template <class H>
H* data_as(TensorOut tensor) {
  return static_cast<H*>(tensor.data);
}

}  // namespace

bool CudaDevice::half_product(std::initializer_list<TensorIn> tensors) const {
  if (half_gemms_ == DType::F32) return false;
  for (const TensorIn& tensor : tensors)
    if (tensor.dtype != DType::F32 && tensor.dtype != half_gemms_) return false;
  return true;
}

void CudaDevice::half_forward(bool conv1d, TensorIn x, TensorIn w, TensorIn b, TensorOut y,
                              std::int64_t rows, std::int64_t in, std::int64_t out) {
  const auto [x16, w16, unused] = half_copies({x, w, TensorIn()});
  // y [rows, out] = x w (Conv1D's w stored [in, out]) or x w^T (Linear's, [out, in])
  const std::span<float> y32 = fp32_target(y, 3);
  matmul_half(half_gemms_, false, !conv1d, rows, out, in, x16, w16, y32.data(), 0.0f);
  // A bias is read as it is kept (fp32, or a 16-bit unit's in the GEMMs' format).
  cuda::for_half(half_gemms_, [&]<class H>() {
    if (b.dtype == half_gemms_) {
      if (y.dtype == half_gemms_) {
        return cuda::add_bias_round_rows(y32.data(), data_as<H>(b), data_as<H>(y), rows, out,
                                         stream_);
      }
      return cuda::add_bias_rows(y32.data(), data_as<H>(b), rows, out, stream_);
    }
    const float* b32 = b.empty() ? nullptr : b.f32().data();
    if (y.dtype == half_gemms_) {
      return cuda::add_bias_round_rows(y32.data(), b32, data_as<H>(y), rows, out, stream_);
    }
    if (b32 != nullptr) cuda::add_bias_rows(y32.data(), b32, rows, out, stream_);
  });
}

void CudaDevice::half_backward(bool conv1d, TensorIn x, TensorIn w, TensorIn dy,
                               std::span<float> dw, std::span<float> db, std::span<float> dx,
                               std::int64_t rows, std::int64_t in, std::int64_t out) {
  // dy rounded once for both products (w only when there is a dx); an fp32 dy with a bias is
  // rounded by the bias gradient's column sums, which read it anyway
  const bool fused = !db.empty() && dy.dtype == DType::F32;
  const auto [dy16, x16, w16] = half_copies({dy, x, dx.empty() ? TensorIn() : w}, fused);
  if (fused) {
    column_sums(dy.f32().data(), db.data(), rows, out, const_cast<std::uint16_t*>(dy16),
                half_gemms_);
  } else if (!db.empty()) {
    column_sums(widened(dy, 2).data(), db.data(), rows, out);
  }
  if (conv1d) {
    matmul_half(half_gemms_, true, false, in, out, rows, x16, dy16, dw.data(), 1.0f);  // [in, out]
  } else {
    matmul_half(half_gemms_, true, false, out, in, rows, dy16, x16, dw.data(), 1.0f);  // [out, in]
  }
  if (!dx.empty()) {
    matmul_half(half_gemms_, false, conv1d, rows, in, out, dy16, w16, dx.data(), 0.0f);
  }
}

void CudaDevice::do_linear_forward_typed(TensorIn x, TensorIn w, TensorIn b, TensorOut y,
                                         std::int64_t rows, std::int64_t in, std::int64_t out) {
  if (!half_product({x, w, b, y}) || rows == 0 || in == 0 || out == 0) {
    return Device::do_linear_forward_typed(x, w, b, y, rows, in, out);
  }
  select();
  half_forward(false, x, w, b, y, rows, in, out);
}

void CudaDevice::do_linear_backward_typed(TensorIn x, TensorIn w, TensorIn dy, std::span<float> dw,
                                          std::span<float> db, std::span<float> dx,
                                          std::int64_t rows, std::int64_t in, std::int64_t out) {
  if (!half_product({x, w, dy}) || rows == 0 || in == 0 || out == 0) {
    return Device::do_linear_backward_typed(x, w, dy, dw, db, dx, rows, in, out);
  }
  select();
  half_backward(false, x, w, dy, dw, db, dx, rows, in, out);
}

void CudaDevice::do_conv1d_forward_typed(TensorIn x, TensorIn w, TensorIn b, TensorOut y,
                                         std::int64_t rows, std::int64_t in, std::int64_t out) {
  if (!half_product({x, w, b, y}) || rows == 0 || in == 0 || out == 0) {
    return Device::do_conv1d_forward_typed(x, w, b, y, rows, in, out);
  }
  select();
  half_forward(true, x, w, b, y, rows, in, out);
}

void CudaDevice::do_conv1d_backward_typed(TensorIn x, TensorIn w, std::span<const float> dy,
                                          std::span<float> dw, std::span<float> db,
                                          std::span<float> dx, std::int64_t rows, std::int64_t in,
                                          std::int64_t out) {
  if (!half_product({x, w}) || rows == 0 || in == 0 || out == 0) {
    return Device::do_conv1d_backward_typed(x, w, dy, dw, db, dx, rows, in, out);
  }
  select();
  half_backward(true, x, w, dy, dw, db, dx, rows, in, out);
}

void CudaDevice::do_embedding_forward_typed(std::span<const std::int64_t> tokens, TensorIn wte,
                                            TensorIn wpe, std::span<float> x, std::int64_t batch,
                                            std::int64_t seq_len, std::int64_t channels,
                                            std::int64_t vocab) {
  if (!cuda::is_half(wte.dtype) || wpe.dtype != wte.dtype) {
    return Device::do_embedding_forward_typed(tokens, wte, wpe, x, batch, seq_len, channels, vocab);
  }
  select();
  cuda::for_half(wte.dtype, [&]<class H>() {
    cuda::embedding_forward(
        tokens.data(), data_as<H>(wte), data_as<H>(wpe), x.data(), batch, seq_len, channels, vocab,
        check_slot({"embedding_forward", tokens.data(), seq_len, vocab}), stream_);
  });
}

void CudaDevice::do_layernorm_forward_typed(std::span<const float> x, TensorIn weight,
                                            TensorIn bias, TensorOut y, std::span<float> mean,
                                            std::span<float> rstd, std::int64_t rows,
                                            std::int64_t channels) {
  const bool half_params = cuda::is_half(weight.dtype);
  if ((!half_params && weight.dtype != DType::F32) || bias.dtype != weight.dtype ||
      (!cuda::is_half(y.dtype) && y.dtype != DType::F32) ||
      (half_params && cuda::is_half(y.dtype) && y.dtype != weight.dtype)) {
    return Device::do_layernorm_forward_typed(x, weight, bias, y, mean, rstd, rows, channels);
  }
  select();
  if (!half_params) {  // fp32 weights: y is the 16-bit one
    return cuda::for_half(y.dtype, [&]<class H>() {
      cuda::layernorm_forward(x.data(), weight.f32().data(), bias.f32().data(), data_as<H>(y),
                              mean.data(), rstd.data(), rows, channels, stream_);
    });
  }
  cuda::for_half(weight.dtype, [&]<class H>() {
    if (y.dtype == weight.dtype) {
      return cuda::layernorm_forward(x.data(), data_as<H>(weight), data_as<H>(bias), data_as<H>(y),
                                     mean.data(), rstd.data(), rows, channels, stream_);
    }
    cuda::layernorm_forward(x.data(), data_as<H>(weight), data_as<H>(bias), y.f32().data(),
                            mean.data(), rstd.data(), rows, channels, stream_);
  });
}

void CudaDevice::do_layernorm_backward_typed(std::span<const float> x, TensorIn weight,
                                             std::span<const float> mean,
                                             std::span<const float> rstd, std::span<const float> dy,
                                             std::span<float> dx, std::span<float> dweight,
                                             std::span<float> dbias, std::int64_t rows,
                                             std::int64_t channels) {
  if (!cuda::is_half(weight.dtype)) {
    return Device::do_layernorm_backward_typed(x, weight, mean, rstd, dy, dx, dweight, dbias, rows,
                                               channels);
  }
  select();
  cuda::for_half(weight.dtype, [&]<class H>() {
    cuda::layernorm_backward(x.data(), data_as<H>(weight), mean.data(), rstd.data(), dy.data(),
                             dx.data(), dweight.data(), dbias.data(),
                             layernorm_partials(rows, channels), column_counters(channels), rows,
                             channels, stream_);
  });
}

void CudaDevice::do_gelu_tanh_forward_typed(TensorIn x, TensorOut y) {
  if (!cuda::is_half(x.dtype) || y.dtype != x.dtype)
    return Device::do_gelu_tanh_forward_typed(x, y);
  select();
  cuda::for_half(x.dtype, [&]<class H>() {
    cuda::gelu_tanh_forward(data_as<H>(x), data_as<H>(y), x.elems, stream_);
  });
}

void CudaDevice::do_gelu_tanh_backward_typed(TensorIn x, std::span<const float> dy,
                                             std::span<float> dx) {
  if (!cuda::is_half(x.dtype)) return Device::do_gelu_tanh_backward_typed(x, dy, dx);
  select();
  cuda::for_half(x.dtype, [&]<class H>() {
    cuda::gelu_tanh_backward(data_as<H>(x), dy.data(), dx.data(), x.elems, stream_);
  });
}

void CudaDevice::do_cross_entropy_add_forward_backward_typed(
    TensorIn logits, std::span<const std::int64_t> labels, TensorOut dlogits, std::int64_t rows,
    std::int64_t classes, std::int64_t padded_classes, std::int64_t mean_rows,
    std::span<double> loss_sum, float grad_scale) {
  if (!cuda::is_half(logits.dtype) || dlogits.dtype != logits.dtype) {
    return Device::do_cross_entropy_add_forward_backward_typed(
        logits, labels, dlogits, rows, classes, padded_classes, mean_rows, loss_sum, grad_scale);
  }
  select();
  auto* row_losses = static_cast<double*>(scratch(static_cast<std::size_t>(rows) * sizeof(double)));
  cuda::for_half(logits.dtype, [&]<class H>() {
    cuda::cross_entropy(data_as<H>(logits), labels.data(), data_as<H>(dlogits), row_losses,
                        check_slot({"cross_entropy", labels.data(), 0, classes}), rows, classes,
                        padded_classes, mean_rows, grad_scale, stream_);
  });
  cuda::add_row_losses(row_losses, rows, loss_sum.data(), stream_);
}

void CudaDevice::do_attention_forward_typed(TensorIn qkv, std::span<float> stats, TensorOut out,
                                            std::int64_t batch, std::int64_t seq_len,
                                            std::int64_t channels, std::int64_t heads) {
  const std::int64_t D = channels / heads;
  if (qkv.dtype != attention_tiles() || out.dtype != qkv.dtype ||
      attention_for(D) != AttentionKind::Fast) {
    return Device::do_attention_forward_typed(qkv, stats, out, batch, seq_len, channels, heads);
  }
  select();
  check_tiled_attention(batch, seq_len, heads, D);
  cuda::for_half(qkv.dtype, [&]<class H>() {
    cuda::fast_attention_forward(data_as<H>(qkv), stats.data(), data_as<H>(out), batch, seq_len,
                                 channels, heads, static_cast<float>(attention_scale(D)), stream_);
  });
}

void CudaDevice::do_attention_backward_typed(TensorIn qkv, std::span<const float> stats,
                                             TensorIn out, std::span<const float> dout,
                                             std::span<float> dqkv, std::int64_t batch,
                                             std::int64_t seq_len, std::int64_t channels,
                                             std::int64_t heads) {
  const std::int64_t D = channels / heads;
  if (qkv.dtype != attention_tiles() || out.dtype != qkv.dtype ||
      attention_for(D) != AttentionKind::Fast) {
    return Device::do_attention_backward_typed(qkv, stats, out, dout, dqkv, batch, seq_len,
                                               channels, heads);
  }
  select();
  check_tiled_attention(batch, seq_len, heads, D);
  void* parts = scratch(cuda::fast_attention_scratch_bytes(batch, seq_len, channels, heads));
  cuda::for_half(qkv.dtype, [&]<class H>() {
    cuda::fast_attention_backward(data_as<H>(qkv), stats.data(), data_as<H>(out), dout.data(),
                                  dqkv.data(), parts, batch, seq_len, channels, heads,
                                  static_cast<float>(attention_scale(D)), stream_);
  });
}

}  // namespace zl
