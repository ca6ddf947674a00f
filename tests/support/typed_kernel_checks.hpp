// typed_kernel_checks.hpp — the checks of the Device kernels on 16-bit tensors
// (ops/tensor_view.hpp), for any device: each gives the bits of the fp32 kernel on the widened
// inputs, its 16-bit output rounded once to nearest even; the typed call books nothing in the
// ledger. tests/model runs them on the CPU devices, tests/gpu on the CUDA device.
#pragma once

#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "ops/device.hpp"
#include "optim/adamw.hpp"

namespace zl::test {

// fp32 values rounded to `dtype` and back: what a 16-bit tensor of them holds.
inline std::vector<float> representable(std::vector<float> values, DType dtype) {
  for (float& value : values) {
    if (dtype == DType::BF16) value = bf16_to_f32(f32_to_bf16(value));
    if (dtype == DType::F16) value = f16_to_f32(f32_to_f16(value));
  }
  return values;
}

inline std::vector<float> random_values(std::size_t count, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(count);
  for (float& value : values) value = normal(rng);
  return values;
}

// A device buffer of `dtype` holding `values` (rounded to it), and back to the host in fp32.
inline Buffer upload_as(Device& device, const std::vector<float>& values, DType dtype) {
  Buffer fp32 = device.alloc(MemCategory::Activations, DType::F32,
                             {static_cast<std::int64_t>(values.size())});
  device.copy_from_host(fp32.data(), values.data(), values.size() * sizeof(float));
  if (dtype == DType::F32) return fp32;
  Buffer typed = device.alloc(MemCategory::Activations, dtype, {fp32.elems()});
  device.convert(fp32.data(), DType::F32, typed.data(), dtype, fp32.elems());
  return typed;
}

inline std::vector<float> download_widened(Device& device, const Buffer& buffer) {
  Buffer fp32 = device.alloc(MemCategory::Activations, DType::F32, {buffer.elems()});
  device.convert(buffer.data(), buffer.dtype(), fp32.data(), DType::F32, buffer.elems());
  std::vector<float> values(static_cast<std::size_t>(buffer.elems()));
  device.copy_to_host(values.data(), fp32.data(), values.size() * sizeof(float));
  return values;
}

inline std::vector<std::uint32_t> bits_of(const std::vector<float>& values) {
  std::vector<std::uint32_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * sizeof(float));
  return bits;
}

inline constexpr std::int64_t kTypedRows = 7, kTypedIn = 12, kTypedOut = 9;

// conv1d and linear, forward and backward, with x and w in `dtype` and y in `out_dtype` (and
// linear's dy in `dtype`: the LM head's backward reads its 16-bit dlogits), `out` outputs a row.
inline void check_products(Device& device, DType dtype, DType out_dtype,
                           std::int64_t out = kTypedOut) {
  const auto x = representable(random_values(kTypedRows * kTypedIn, 1), dtype);
  const auto w = representable(random_values(kTypedIn * out, 2), dtype);
  const auto b = representable(random_values(out, 3), dtype);
  const auto dy = representable(random_values(kTypedRows * out, 4), dtype);
  Buffer x16 = upload_as(device, x, dtype), w16 = upload_as(device, w, dtype),
         b16 = upload_as(device, b, dtype);
  Buffer x32 = upload_as(device, x, DType::F32), w32 = upload_as(device, w, DType::F32),
         b32 = upload_as(device, b, DType::F32), dy32 = upload_as(device, dy, DType::F32),
         dy16 = upload_as(device, dy, dtype);
  auto zeros = [&](std::int64_t elems, DType type = DType::F32) {
    return device.alloc(MemCategory::Activations, type, {elems});
  };
  for (const bool conv : {true, false}) {
    SCOPED_TRACE(conv ? "conv1d" : "linear");
    auto forward = [&](TensorIn xs, TensorIn ws, TensorIn bs, TensorOut ys) {
      if (conv) return device.conv1d_forward(xs, ws, bs, ys, kTypedRows, kTypedIn, out);
      device.linear_forward(xs, ws, bs, ys, kTypedRows, kTypedIn, out);
    };
    auto backward = [&](TensorIn xs, TensorIn ws, TensorIn dys, Buffer& dw, Buffer& db,
                        Buffer& dx) {
      if (conv) {
        return device.conv1d_backward(xs, ws, dy32.as<float>(), dw.as<float>(), db.as<float>(),
                                      dx.as<float>(), kTypedRows, kTypedIn, out);
      }
      device.linear_backward(xs, ws, dys, dw.as<float>(), db.as<float>(), dx.as<float>(),
                             kTypedRows, kTypedIn, out);
    };
    Buffer y = zeros(kTypedRows * out, out_dtype), y_ref = zeros(kTypedRows * out);
    const std::int64_t booked = device.ledger().total_current_bytes();
    forward(x16, w16, b16, y);
    EXPECT_EQ(device.ledger().total_current_bytes(), booked) << "the scratch is not booked";
    forward(x32, w32, b32, y_ref);
    EXPECT_EQ(bits_of(download_widened(device, y)),
              bits_of(representable(download_widened(device, y_ref), out_dtype)));
    Buffer dw = zeros(kTypedIn * out), db = zeros(out), dx = zeros(kTypedRows * kTypedIn);
    Buffer dw_ref = zeros(kTypedIn * out), db_ref = zeros(out),
           dx_ref = zeros(kTypedRows * kTypedIn);
    backward(x16, w16, dy16, dw, db, dx);
    backward(x32, w32, dy32, dw_ref, db_ref, dx_ref);
    EXPECT_EQ(bits_of(download_widened(device, dw)), bits_of(download_widened(device, dw_ref)));
    EXPECT_EQ(bits_of(download_widened(device, db)), bits_of(download_widened(device, db_ref)));
    EXPECT_EQ(bits_of(download_widened(device, dx)), bits_of(download_widened(device, dx_ref)));
  }
}

// The loss of 16-bit logits with its gradient written over them in 16 bits, multiplied by
// grad_scale before the rounding, against the fp32 kernel on the same values and then scale().
inline void check_cross_entropy(Device& device, DType dtype) {
  constexpr std::int64_t kRows = 6, kClasses = 37, kPadded = 40, kMeanRows = 10;
  const auto logits = representable(random_values(kRows * kPadded, 12), dtype);
  const std::vector<std::int64_t> labels = {0, 36, 5, 17, 36, 2};
  Buffer label_buffer = device.alloc(MemCategory::Activations, DType::I64, {kRows});
  device.copy_from_host(label_buffer.data(), labels.data(), labels.size() * sizeof(std::int64_t));
  const auto label_span = label_buffer.as<std::int64_t>();
  for (const float grad_scale : {1.0f, 1024.0f, 0.37f}) {
    SCOPED_TRACE("grad_scale " + std::to_string(grad_scale));
    Buffer typed = upload_as(device, logits, dtype), fp32 = upload_as(device, logits, DType::F32);
    Buffer sum = device.alloc(MemCategory::CommBuffer, DType::F64, {1});
    Buffer sum_ref = device.alloc(MemCategory::CommBuffer, DType::F64, {1});
    device.cross_entropy_add_forward_backward(typed, label_span, typed, kRows, kClasses, kPadded,
                                              kMeanRows, sum.as<double>(), grad_scale);
    device.cross_entropy_add_forward_backward(fp32, label_span, fp32, kRows, kClasses, kPadded,
                                              kMeanRows, sum_ref.as<double>());
    if (grad_scale != 1.0f) device.scale(fp32.as<float>(), grad_scale);
    EXPECT_EQ(bits_of(download_widened(device, typed)),
              bits_of(representable(download_widened(device, fp32), dtype)));
    double loss = 0.0, loss_ref = 1.0;
    device.copy_to_host(&loss, sum.data(), sizeof(double));
    device.copy_to_host(&loss_ref, sum_ref.data(), sizeof(double));
    EXPECT_EQ(std::bit_cast<std::uint64_t>(loss), std::bit_cast<std::uint64_t>(loss_ref));
  }
}

// LayerNorm (fp32 x, a 16-bit y), GELU and attention (16-bit qkv and out) in `dtype` against
// the fp32 kernels on the same values, for B sequences of T tokens, C channels and H heads.
inline void check_block_kernels(Device& device, DType dtype, std::int64_t B, std::int64_t T,
                                std::int64_t C, std::int64_t H) {
  const std::int64_t N = B * T;
  auto zeros = [&](std::int64_t elems, DType type = DType::F32) {
    return device.alloc(MemCategory::Activations, type, {elems});
  };
  // LayerNorm: fp32 x, a 16-bit y.
  Buffer x = upload_as(device, random_values(N * C, 5), DType::F32);
  Buffer weight = upload_as(device, random_values(C, 6), DType::F32);
  Buffer bias = upload_as(device, random_values(C, 7), DType::F32);
  Buffer y = zeros(N * C, dtype), y_ref = zeros(N * C), mean = zeros(N), rstd = zeros(N);
  device.layernorm_forward(x.as<float>(), weight.as<float>(), bias.as<float>(), y, mean.as<float>(),
                           rstd.as<float>(), N, C);
  device.layernorm_forward(x.as<float>(), weight.as<float>(), bias.as<float>(), y_ref,
                           mean.as<float>(), rstd.as<float>(), N, C);
  EXPECT_EQ(bits_of(download_widened(device, y)),
            bits_of(representable(download_widened(device, y_ref), dtype)));

  // GELU: 16-bit input and output; its backward from the 16-bit input.
  const auto fc = representable(random_values(N * 4 * C, 8), dtype);
  Buffer fc16 = upload_as(device, fc, dtype), fc32 = upload_as(device, fc, DType::F32);
  Buffer g = zeros(N * 4 * C, dtype), g_ref = zeros(N * 4 * C);
  device.gelu_tanh_forward(fc16, g);
  device.gelu_tanh_forward(fc32, g_ref);
  EXPECT_EQ(bits_of(download_widened(device, g)),
            bits_of(representable(download_widened(device, g_ref), dtype)));
  Buffer dg = upload_as(device, random_values(N * 4 * C, 9), DType::F32);
  Buffer dfc = zeros(N * 4 * C), dfc_ref = zeros(N * 4 * C);
  device.gelu_tanh_backward(fc16, dg.as<float>(), dfc.as<float>());
  device.gelu_tanh_backward(fc32, dg.as<float>(), dfc_ref.as<float>());
  EXPECT_EQ(bits_of(download_widened(device, dfc)), bits_of(download_widened(device, dfc_ref)));

  // Attention: 16-bit qkv and output; backward from both.
  const auto qkv = representable(random_values(N * 3 * C, 10), dtype);
  Buffer qkv16 = upload_as(device, qkv, dtype), qkv32 = upload_as(device, qkv, DType::F32);
  Buffer out = zeros(N * C, dtype), out_ref = zeros(N * C);
  Buffer stats = zeros(B * H * T * kAttentionStatsPerRow);
  Buffer stats_ref = zeros(B * H * T * kAttentionStatsPerRow);
  device.attention_forward(qkv16, stats.as<float>(), out, B, T, C, H);
  device.attention_forward(qkv32, stats_ref.as<float>(), out_ref, B, T, C, H);
  EXPECT_EQ(bits_of(download_widened(device, stats)), bits_of(download_widened(device, stats_ref)));
  EXPECT_EQ(bits_of(download_widened(device, out)),
            bits_of(representable(download_widened(device, out_ref), dtype)));
  // Backward reads the output as kept: the reference reads the same rounded values in fp32.
  Buffer out32 = upload_as(device, download_widened(device, out), DType::F32);
  Buffer dout = upload_as(device, random_values(N * C, 11), DType::F32);
  Buffer dqkv = zeros(N * 3 * C), dqkv_ref = zeros(N * 3 * C);
  device.attention_backward(qkv16, stats.as<float>(), out, dout.as<float>(), dqkv.as<float>(), B, T,
                            C, H);
  device.attention_backward(qkv32, stats.as<float>(), out32, dout.as<float>(), dqkv_ref.as<float>(),
                            B, T, C, H);
  EXPECT_EQ(bits_of(download_widened(device, dqkv)), bits_of(download_widened(device, dqkv_ref)));
}

// The kernels that read a 16-bit unit's parameters as they are kept: the embedding's tables, and
// LayerNorm's weight and bias forward (into an fp32 y, and into a y of `dtype`) and weight
// backward, against the fp32 kernels on the same values; B sequences of T tokens, C channels.
inline void check_parameter_kernels(Device& device, DType dtype, std::int64_t B, std::int64_t T,
                                    std::int64_t C) {
  const std::int64_t N = B * T, vocab = 11;
  auto zeros = [&](std::int64_t elems, DType type = DType::F32) {
    return device.alloc(MemCategory::Activations, type, {elems});
  };
  auto both = [&](std::int64_t elems, std::uint32_t seed) {
    const auto values = representable(random_values(static_cast<std::size_t>(elems), seed), dtype);
    return std::pair{upload_as(device, values, dtype), upload_as(device, values, DType::F32)};
  };
  // Embedding: x = wte[token] + wpe[t], the tables 16-bit.
  std::vector<std::int64_t> ids(static_cast<std::size_t>(N));
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int64_t>((i * 7) % vocab);
  Buffer tokens = device.alloc(MemCategory::Activations, DType::I64, {N});
  device.copy_from_host(tokens.data(), ids.data(), ids.size() * sizeof(std::int64_t));
  const auto [wte16, wte32] = both(vocab * C, 20);
  const auto [wpe16, wpe32] = both(T * C, 21);
  Buffer x = zeros(N * C), x_ref = zeros(N * C);
  device.embedding_forward(tokens.as<std::int64_t>(), wte16, wpe16, x.as<float>(), B, T, C, vocab);
  device.embedding_forward(tokens.as<std::int64_t>(), wte32, wpe32, x_ref.as<float>(), B, T, C,
                           vocab);
  EXPECT_EQ(bits_of(download_widened(device, x)), bits_of(download_widened(device, x_ref)));

  // LayerNorm forward with a 16-bit weight and bias, into an fp32 y and into a 16-bit one.
  const auto [weight16, weight32] = both(C, 22);
  const auto [bias16, bias32] = both(C, 23);
  Buffer mean = zeros(N), rstd = zeros(N), mean_ref = zeros(N), rstd_ref = zeros(N);
  for (const DType y_dtype : {DType::F32, dtype}) {
    SCOPED_TRACE(std::string("y in ") + std::string(dtype_name(y_dtype)));
    Buffer y = zeros(N * C, y_dtype), y_ref = zeros(N * C);
    device.layernorm_forward(x.as<float>(), weight16, bias16, y, mean.as<float>(), rstd.as<float>(),
                             N, C);
    device.layernorm_forward(x.as<float>(), weight32, bias32, y_ref, mean_ref.as<float>(),
                             rstd_ref.as<float>(), N, C);
    EXPECT_EQ(bits_of(download_widened(device, y)),
              bits_of(representable(download_widened(device, y_ref), y_dtype)));
    EXPECT_EQ(bits_of(download_widened(device, rstd)), bits_of(download_widened(device, rstd_ref)));
  }
  // LayerNorm backward with a 16-bit weight: dx added into, dweight and dbias summed.
  Buffer dy = upload_as(device, random_values(N * C, 24), DType::F32);
  Buffer dx = zeros(N * C), dw = zeros(C), db = zeros(C);
  Buffer dx_ref = zeros(N * C), dw_ref = zeros(C), db_ref = zeros(C);
  device.layernorm_backward(x.as<float>(), weight16, mean.as<float>(), rstd.as<float>(),
                            dy.as<float>(), dx.as<float>(), dw.as<float>(), db.as<float>(), N, C);
  device.layernorm_backward(x.as<float>(), weight32, mean.as<float>(), rstd.as<float>(),
                            dy.as<float>(), dx_ref.as<float>(), dw_ref.as<float>(),
                            db_ref.as<float>(), N, C);
  EXPECT_EQ(bits_of(download_widened(device, dx)), bits_of(download_widened(device, dx_ref)));
  EXPECT_EQ(bits_of(download_widened(device, dw)), bits_of(download_widened(device, dw_ref)));
  EXPECT_EQ(bits_of(download_widened(device, db)), bits_of(download_widened(device, db_ref)));
}

// adamw_update_unscaled on `grads` (holding `values`) against adamw_update, or
// adamw_update_rounded into a copy of `copy_dtype` when `copy`, on `g`: the gradient the step
// composed (widened, divided, scaled). The gradients must be left as they were.
inline void expect_unscaled_update(Device& device, Buffer& grads, Buffer& g,
                                   const std::vector<float>& values, float divisor, float clip,
                                   bool copy, DType copy_dtype) {
  const std::int64_t elems = grads.elems();
  const AdamWScalars scalars = adamw_scalars(AdamWConfig{.lr = 1e-2, .weight_decay = 0.1}, 3);
  const auto start = random_values(static_cast<std::size_t>(elems), 31);
  const auto m_start = random_values(static_cast<std::size_t>(elems), 32);
  Buffer master = upload_as(device, start, DType::F32),
         master_ref = upload_as(device, start, DType::F32);
  Buffer m = upload_as(device, m_start, DType::F32), m_ref = upload_as(device, m_start, DType::F32);
  Buffer v = device.alloc(MemCategory::Optimizer, DType::F32, {elems});  // zeros
  Buffer v_ref = device.alloc(MemCategory::Optimizer, DType::F32, {elems});
  Buffer params = device.alloc(MemCategory::Params, copy_dtype, {elems});
  Buffer params_ref = device.alloc(MemCategory::Params, copy_dtype, {elems});
  device.adamw_update_unscaled(master.as<float>(), grads, divisor, clip, m.as<float>(),
                               v.as<float>(), scalars, copy ? params.data() : nullptr, copy_dtype);
  if (copy) {
    device.adamw_update_rounded(master_ref.as<float>(), g.as<float>(), m_ref.as<float>(),
                                v_ref.as<float>(), scalars, params_ref.data(), copy_dtype);
  } else {
    device.adamw_update(master_ref.as<float>(), g.as<float>(), m_ref.as<float>(), v_ref.as<float>(),
                        scalars);
  }
  for (const auto& [got, want] : {std::pair{&master, &master_ref}, std::pair{&m, &m_ref},
                                  std::pair{&v, &v_ref}, std::pair{&params, &params_ref}}) {
    EXPECT_EQ(bits_of(download_widened(device, *got)), bits_of(download_widened(device, *want)));
  }
  EXPECT_EQ(bits_of(download_widened(device, grads)), bits_of(values))
      << "the gradients are read, not written";
}

// The update's reads of a reduced gradient (Device::block_sumsq_unscaled, adamw_update_unscaled)
// against the same device's calls composed as the step made them before: the gradient widened
// into fp32, divide() by the loss scale, scale() by the clip factor, then block_sumsq or
// adamw_update (and the parameters set from the master: copied in fp32, rounded to bf16 or
// fp16), for fp32 and 16-bit gradients, with and without unscaling and clipping.
inline void check_unscaled_reads(Device& device) {
  constexpr std::int64_t kElems = 3 * 64 + 64 * 5;  // whole norm blocks
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16}) {
    const auto values = representable(random_values(kElems, 30), dtype);
    for (const float divisor : {1.0f, 1024.0f, 3.0f}) {
      SCOPED_TRACE(std::string(dtype_name(dtype)) + " / " + std::to_string(divisor));
      Buffer grads = upload_as(device, values, dtype);
      Buffer g = upload_as(device, values, DType::F32);  // composed: widen, divide, scale
      if (divisor != 1.0f) device.divide(g.as<float>(), divisor);
      Buffer partials = device.alloc(MemCategory::CommBuffer, DType::F64, {kElems / 64});
      Buffer partials_ref = device.alloc(MemCategory::CommBuffer, DType::F64, {kElems / 64});
      device.block_sumsq_unscaled(grads, divisor, partials.as<double>());
      device.block_sumsq(g.as<float>(), partials_ref.as<double>());
      std::vector<double> got(kElems / 64), want(kElems / 64);
      device.copy_to_host(got.data(), partials.data(), got.size() * sizeof(double));
      device.copy_to_host(want.data(), partials_ref.data(), want.size() * sizeof(double));
      EXPECT_EQ(got, want) << "the norm's partials";
      for (const float clip : {1.0f, 0.37f}) {
        SCOPED_TRACE("clip " + std::to_string(clip));
        if (clip != 1.0f) device.scale(g.as<float>(), clip);
        expect_unscaled_update(device, grads, g, values, divisor, clip, false, DType::F32);
        for (const DType copy_dtype : {DType::F32, DType::BF16, DType::F16}) {
          SCOPED_TRACE("parameters in " + std::string(dtype_name(copy_dtype)));
          expect_unscaled_update(device, grads, g, values, divisor, clip, true, copy_dtype);
        }
      }
    }
  }
}

}  // namespace zl::test
