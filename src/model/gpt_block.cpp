// gpt_block.cpp — one GPT-2 block forward and backward: x + attn(ln_1(x)), then + mlp(ln_2(.)).
// Shapes: N = rows * T token rows, C channels; every activation is [N, C] unless noted. A block
// that activation checkpointing recomputes writes what it did not keep into the shared working
// copy, and rebuilds it there at the start of its backward. With 16-bit activations every matrix
// product's input and output is written in 16 bits by the kernel that makes it (rounded once, so
// forward computes on the values backward will see), and read in 16 bits by the kernels that use
// it.
#include <array>
#include <cstddef>

#include "model/gpt.hpp"

namespace zl {

namespace {

// A block unit's tensors, in the order of gpt_units().
enum BlockParam : std::size_t {
  kLn1Weight,
  kLn1Bias,
  kAttnWeight,  // c_attn [C, 3C]
  kAttnBias,
  kAttnProjWeight,  // attn.c_proj [C, C]
  kAttnProjBias,
  kLn2Weight,
  kLn2Bias,
  kFcWeight,  // c_fc [C, 4C]
  kFcBias,
  kMlpProjWeight,  // mlp.c_proj [4C, C]
  kMlpProjBias,
  kBlockParams
};

// The block's flat buffer (parameters, in the training dtype, or fp32 gradients) cut into its
// tensors.
template <class Flat>
std::array<Flat, kBlockParams> block_tensors(Flat flat, std::int64_t C) {
  const std::array<std::int64_t, kBlockParams> elems = {C, C, C * 3 * C, 3 * C, C * C,     C,
                                                        C, C, C * 4 * C, 4 * C, 4 * C * C, C};
  std::array<Flat, kBlockParams> tensors;
  std::int64_t offset = 0;
  for (std::size_t i = 0; i < kBlockParams; ++i) {
    tensors[i] = flat.subspan(static_cast<std::size_t>(offset), static_cast<std::size_t>(elems[i]));
    offset += elems[i];
  }
  return tensors;
}

}  // namespace

Gpt::BlockTensors Gpt::block_tensors_of(int layer) {
  BlockActivations& own = blocks_[static_cast<std::size_t>(layer)];
  // A tensor the block did not keep is used from the shared copy.
  auto held = [&](Buffer BlockActivations::*tensor) -> Buffer& {
    Buffer& kept = own.*tensor;
    return kept.elems() > 0 ? kept : work_.*tensor;
  };
  auto f32 = [&](Buffer BlockActivations::*tensor) { return held(tensor).as<float>(); };
  using A = BlockActivations;
  return {held(&A::ln1),     held(&A::qkv),     held(&A::attn),    held(&A::ln2),      held(&A::fc),
          held(&A::fc_gelu), f32(&A::ln1_mean), f32(&A::ln1_rstd), f32(&A::att_stats), f32(&A::mid),
          f32(&A::ln2_mean), f32(&A::ln2_rstd), f32(&A::out)};
}

void Gpt::forward_block(int layer, TensorIn params, bool rebuild_only) {
  const std::int64_t N = token_rows(), C = config_.n_embd, H = config_.n_head;
  const auto p = block_tensors(params, C);
  BlockActivations& own = blocks_[static_cast<std::size_t>(layer)];
  const BlockTensors a = block_tensors_of(layer);
  const auto x = block_input(layer);
  // In backward's rebuild, a step runs only if the block did not keep what it writes: the same
  // kernels on the same inputs, so the rebuilt tensors are bitwise forward's.
  auto runs = [&](const Buffer& written) { return !rebuild_only || written.elems() == 0; };
  // Attention: qkv [N, 3C] = ln_1(x) c_attn; attn [N, C] = heads side by side; mid = x + attn
  // c_proj.
  if (runs(own.ln1)) {
    device_.layernorm_forward(x, p[kLn1Weight], p[kLn1Bias], a.ln1, a.ln1_mean, a.ln1_rstd, N, C);
  }
  if (runs(own.qkv)) {
    device_.conv1d_forward(a.ln1, p[kAttnWeight], p[kAttnBias], a.qkv, N, C, 3 * C);
  }
  if (runs(own.att_stats)) {
    device_.attention_forward(a.qkv, a.att_stats, a.attn, rows_, seq_len_, C, H);
  }
  // The projections' outputs are rounded before the skip connection adds them to the fp32
  // residual stream, as autocast's 16-bit c_proj output is.
  if (runs(own.mid)) {
    device_.conv1d_forward(a.attn, p[kAttnProjWeight], p[kAttnProjBias], a.mid, N, C, C);
    if (sixteen_bit()) device_.round_to(a.mid, activation_dtype_);
    device_.add(a.mid.data(), x.data(), DType::F32,
                static_cast<std::int64_t>(a.mid.size()));  // the skip connection
  }
  // MLP: fc [N, 4C] = ln_2(mid) c_fc; out = mid + GELU(fc) c_proj.
  if (runs(own.ln2)) {
    device_.layernorm_forward(a.mid, p[kLn2Weight], p[kLn2Bias], a.ln2, a.ln2_mean, a.ln2_rstd, N,
                              C);
  }
  if (runs(own.fc)) {
    device_.conv1d_forward(a.ln2, p[kFcWeight], p[kFcBias], a.fc, N, C, 4 * C);
  }
  if (runs(own.fc_gelu)) {
    device_.gelu_tanh_forward(a.fc, a.fc_gelu);
  }
  if (rebuild_only) return;  // backward needs nothing past GELU, and the output is always kept
  device_.conv1d_forward(a.fc_gelu, p[kMlpProjWeight], p[kMlpProjBias], a.out, N, 4 * C, C);
  if (sixteen_bit()) device_.round_to(a.out, activation_dtype_);
  device_.add(a.out.data(), a.mid.data(), DType::F32,
              static_cast<std::int64_t>(a.out.size()));  // the skip connection
}

void Gpt::backward_block(int layer, TensorIn params, std::span<float> grads) {
  if (policy_.recomputes(layer)) forward_block(layer, params, true);
  const std::int64_t N = token_rows(), C = config_.n_embd, H = config_.n_head;
  const auto p = block_tensors(params, C);
  const auto g = block_tensors(grads, C);
  const BlockTensors a = block_tensors_of(layer);
  // On entry dresidual = d loss / d out. The skip connection passes it to mid unchanged; the MLP
  // branch adds its part through ln_2's backward.
  const auto dresidual = dresidual_.as<float>();
  device_.conv1d_backward(a.fc_gelu, p[kMlpProjWeight], dresidual, g[kMlpProjWeight],
                          g[kMlpProjBias], dfc_gelu_.as<float>(), N, 4 * C, C);
  device_.gelu_tanh_backward(a.fc, dfc_gelu_.as<float>(), dfc_.as<float>());
  device_.conv1d_backward(a.ln2, p[kFcWeight], dfc_.as<float>(), g[kFcWeight], g[kFcBias],
                          dln_.as<float>(), N, C, 4 * C);
  device_.layernorm_backward(a.mid, p[kLn2Weight], a.ln2_mean, a.ln2_rstd, dln_.as<float>(),
                             dresidual, g[kLn2Weight], g[kLn2Bias], N, C);
  // Now dresidual = d loss / d mid; the same again for the attention branch, down to d x.
  device_.conv1d_backward(a.attn, p[kAttnProjWeight], dresidual, g[kAttnProjWeight],
                          g[kAttnProjBias], dattn_.as<float>(), N, C, C);
  device_.attention_backward(a.qkv, a.att_stats, a.attn, dattn_.as<float>(), dqkv_.as<float>(),
                             rows_, seq_len_, C, H);
  device_.conv1d_backward(a.ln1, p[kAttnWeight], dqkv_.as<float>(), g[kAttnWeight], g[kAttnBias],
                          dln_.as<float>(), N, C, 3 * C);
  device_.layernorm_backward(block_input(layer), p[kLn1Weight], a.ln1_mean, a.ln1_rstd,
                             dln_.as<float>(), dresidual, g[kLn1Weight], g[kLn1Bias], N, C);
}

}  // namespace zl
