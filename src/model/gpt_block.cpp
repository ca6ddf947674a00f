// gpt_block.cpp — one GPT-2 block forward and backward: x + attn(ln_1(x)), then + mlp(ln_2(.)).
// Shapes: N = rows * T token rows, C channels; every activation is [N, C] unless noted.
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

// The block's flat buffer (parameters or gradients) cut into its tensors.
template <class T>
std::array<std::span<T>, kBlockParams> block_tensors(std::span<T> flat, std::int64_t C) {
  const std::array<std::int64_t, kBlockParams> elems = {C, C, C * 3 * C, 3 * C, C * C,     C,
                                                        C, C, C * 4 * C, 4 * C, 4 * C * C, C};
  std::array<std::span<T>, kBlockParams> tensors;
  std::size_t offset = 0;
  for (std::size_t i = 0; i < kBlockParams; ++i) {
    tensors[i] = flat.subspan(offset, static_cast<std::size_t>(elems[i]));
    offset += tensors[i].size();
  }
  return tensors;
}

}  // namespace

void Gpt::forward_block(int layer, std::span<const float> params) {
  const std::int64_t N = token_rows(), C = config_.n_embd, H = config_.n_head;
  const auto p = block_tensors(params, C);
  auto& a = blocks_[static_cast<std::size_t>(layer)];
  const auto x = block_input(layer);
  // Attention: qkv [N, 3C] = ln_1(x) c_attn; attn [N, C] = heads side by side; mid = x + attn
  // c_proj.
  device_.layernorm_forward(x, p[kLn1Weight], p[kLn1Bias], a.ln1.as<float>(),
                            a.ln1_mean.as<float>(), a.ln1_rstd.as<float>(), N, C);
  device_.conv1d_forward(a.ln1.as<float>(), p[kAttnWeight], p[kAttnBias], a.qkv.as<float>(), N, C,
                         3 * C);
  device_.attention_forward(a.qkv.as<float>(), a.probs.as<float>(), a.attn.as<float>(), rows_,
                            seq_len_, C, H);
  device_.conv1d_forward(a.attn.as<float>(), p[kAttnProjWeight], p[kAttnProjBias],
                         a.mid.as<float>(), N, C, C);
  device_.add(a.mid.data(), x.data(), DType::F32, a.mid.elems());  // the skip connection
  // MLP: fc [N, 4C] = ln_2(mid) c_fc; out = mid + GELU(fc) c_proj.
  device_.layernorm_forward(a.mid.as<float>(), p[kLn2Weight], p[kLn2Bias], a.ln2.as<float>(),
                            a.ln2_mean.as<float>(), a.ln2_rstd.as<float>(), N, C);
  device_.conv1d_forward(a.ln2.as<float>(), p[kFcWeight], p[kFcBias], a.fc.as<float>(), N, C,
                         4 * C);
  device_.gelu_tanh_forward(a.fc.as<float>(), a.fc_gelu.as<float>());
  device_.conv1d_forward(a.fc_gelu.as<float>(), p[kMlpProjWeight], p[kMlpProjBias],
                         a.out.as<float>(), N, 4 * C, C);
  device_.add(a.out.data(), a.mid.data(), DType::F32, a.out.elems());  // the skip connection
}

void Gpt::backward_block(int layer, std::span<const float> params, std::span<float> grads) {
  const std::int64_t N = token_rows(), C = config_.n_embd, H = config_.n_head;
  const auto p = block_tensors(params, C);
  const auto g = block_tensors(grads, C);
  const auto& a = blocks_[static_cast<std::size_t>(layer)];
  // On entry dresidual = d loss / d out. The skip connection passes it to mid unchanged; the MLP
  // branch adds its part through ln_2's backward.
  const auto dresidual = dresidual_.as<float>();
  device_.conv1d_backward(a.fc_gelu.as<float>(), p[kMlpProjWeight], dresidual, g[kMlpProjWeight],
                          g[kMlpProjBias], dfc_gelu_.as<float>(), N, 4 * C, C);
  device_.gelu_tanh_backward(a.fc.as<float>(), dfc_gelu_.as<float>(), dfc_.as<float>());
  device_.conv1d_backward(a.ln2.as<float>(), p[kFcWeight], dfc_.as<float>(), g[kFcWeight],
                          g[kFcBias], dln_.as<float>(), N, C, 4 * C);
  device_.layernorm_backward(a.mid.as<float>(), p[kLn2Weight], a.ln2_mean.as<float>(),
                             a.ln2_rstd.as<float>(), dln_.as<float>(), dresidual, g[kLn2Weight],
                             g[kLn2Bias], N, C);
  // Now dresidual = d loss / d mid; the same again for the attention branch, down to d x.
  device_.conv1d_backward(a.attn.as<float>(), p[kAttnProjWeight], dresidual, g[kAttnProjWeight],
                          g[kAttnProjBias], dattn_.as<float>(), N, C, C);
  device_.attention_backward(a.qkv.as<float>(), a.probs.as<float>(), dattn_.as<float>(),
                             dqkv_.as<float>(), rows_, seq_len_, C, H);
  device_.conv1d_backward(a.ln1.as<float>(), p[kAttnWeight], dqkv_.as<float>(), g[kAttnWeight],
                          g[kAttnBias], dln_.as<float>(), N, C, 3 * C);
  device_.layernorm_backward(block_input(layer), p[kLn1Weight], a.ln1_mean.as<float>(),
                             a.ln1_rstd.as<float>(), dln_.as<float>(), dresidual, g[kLn1Weight],
                             g[kLn1Bias], N, C);
}

}  // namespace zl
