// gpt.hpp — GPT-2 (Hugging Face GPT2LMHeadModel's math, names and shapes) written by hand,
// forward and backward, one unit at a time. Token and position embeddings; n_layer pre-LayerNorm
// blocks x = x + attn(ln_1(x)), x = x + mlp(ln_2(x)) with causal multi-head attention and a tanh
// GELU MLP; a final ln_f; logits = ln_f(x) wte^T (the LM head is tied to the token embedding);
// cross-entropy averaged over all B*T tokens.
//
// The vocabulary is padded, as llm.c pads it: wte has padded_vocab() rows (a multiple of 128,
// 50304 for GPT-2's 50257) so that the LM head's matrix product is aligned; the rows past the
// vocabulary start at zero, their logits take no part in the softmax and the loss, so their
// gradient is zero and they stay zero. Files in Hugging Face's shapes leave them out.
//
// Units: 0 = {wte, wpe}; 1+i = block h.{i}; L+1 = {ln_f}. forward_order() is [0, 1, ..., L+1, 0]:
// unit 0's first visit looks the tokens up, its second is the LM head. Backward runs the order
// reversed, so the head adds its d wte first and the embedding adds its part last, into the same
// gradient buffer.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "model/gpt_config.hpp"
#include "model/model.hpp"
#include "model/activation_policy.hpp"
#include "ops/device.hpp"

namespace zl {

/// GPT-2 on a Device. Activations are allocated on `device` (category Activations) per micro-batch
/// in begin() and kept until the next begin() or the model's end; the blocks `policy` checkpoints
/// keep less and rebuild the rest in their backward, with bitwise the same results.
///
/// With a 16-bit `activation_dtype` (bf16 or fp16: mixed precision) the model keeps activations
/// as torch.autocast does: every matrix product's inputs and outputs (the LayerNorms' outputs,
/// qkv, attention's output, c_fc's output, GELU's, ln_f's and the logits with their gradient) are
/// written in 16 bits by the kernel that makes them and read in 16 bits by the kernels that use
/// them (ops/tensor_view.hpp), which compute in fp32; the residual stream, the LayerNorm and
/// attention statistics, the loss and the gradient scratch stay fp32. The LM head and the loss run
/// in chunks of kHeadChunkRows token rows, so a device that computes a 16-bit kernel through fp32
/// scratch never needs an [N, vocab] fp32 buffer.
class Gpt final : public Model {
 public:
  /// Token rows the LM head and the loss take at a time with 16-bit activations.
  static constexpr std::int64_t kHeadChunkRows = 512;
  /// Throws zl::Error (see validate(GptConfig)) for a bad shape, an every:K policy with K < 1 or
  /// an activation dtype other than fp32, bf16 and fp16.
  Gpt(Device& device, const GptConfig& config, ActivationPolicy policy = {},
      DType activation_dtype = DType::F32);
  const std::vector<UnitSpec>& units() const override { return units_; }
  /// [0, 1, ..., n_layer + 1, 0]: unit 0 runs again last, as the tied LM head.
  std::vector<int> forward_order() const override { return order_; }
  /// nanoGPT's and Hugging Face's GPT-2 init: LayerNorm weights 1 and every bias 0; the two
  /// c_proj weights of each block N(0, 0.02 / sqrt(2 n_layer)); every other weight and both
  /// embeddings N(0, 0.02). Element e of parameter `name` is std * standard_normal(seed,
  /// stream_of(name), e), computed in double and rounded once: the same for every world size.
  void init_unit(int unit, std::span<float> flat, std::uint64_t seed) const override;
  /// Takes tokens [rows, T] and next tokens y [rows, T] with T = batch.features <= block_size
  /// and every id in [0, vocab) (the real vocabulary, not the padded one); throws zl::Error naming
  /// what is wrong otherwise.
  void begin(const Batch& batch) override;
  void forward_unit(int unit, TensorIn params) override;
  using Model::loss;
  /// Mean cross-entropy over the rows * T tokens; seeds backward with grad_scale * d loss / d
  /// logits.
  float loss(float grad_scale) override;
  void add_loss(float grad_scale, std::span<float> loss_sum) override;
  void backward_unit(int unit, TensorIn params, std::span<float> grads) override;

  /// The shape the model was built with (validated).
  const GptConfig& config() const { return config_; }
  /// The logits [rows, T, vocab] of the micro-batch (the real vocabulary's columns; the padded
  /// ones are left out), copied to the host (widened to fp32 when kept in 16 bits), once the LM
  /// head has run and before loss(), which writes their gradient over them.
  std::vector<float> logits() const;

 private:
  // What one block keeps from forward for backward; N = rows * T.
  struct BlockActivations {
    Buffer ln1, ln1_mean, ln1_rstd;  // ln_1(x) [N, C]; its row mean and 1/std [N]
    Buffer qkv;                      // c_attn output [N, 3C]
    Buffer att_stats;                // attention rows' max score and sum of exps [rows, n_head, T, 2]
    Buffer attn;                     // attention output before c_proj [N, C]
    Buffer mid;                      // x + attn(ln_1(x)) [N, C]
    Buffer ln2, ln2_mean, ln2_rstd;  // ln_2(mid) [N, C], [N], [N]
    Buffer fc;                       // c_fc output before GELU [N, 4C]
    Buffer fc_gelu;                  // GELU(fc) [N, 4C]
    Buffer out;                      // mid + mlp(ln_2(mid)) [N, C]: the block's output
  };
  // A block's tensors wherever they are held: its own buffers, or the shared copy of those a
  // checkpointed block does not keep. A matrix product's inputs and outputs are in the activation
  // dtype (the kernels read and write them in 16 bits); the rest are fp32.
  struct BlockTensors {
    TensorOut ln1, qkv, attn, ln2, fc, fc_gelu;
    std::span<float> ln1_mean, ln1_rstd, att_stats, mid, ln2_mean, ln2_rstd, out;
  };

  int last_unit() const { return config_.n_layer + 1; }
  std::int64_t token_rows() const { return rows_ * seq_len_; }
  void check_params(const char* pass, int unit, TensorIn params, std::size_t grads_elems) const;
  // What an out-of-order call should do instead: "unit 2 is next", "loss() has not run", ...
  std::string forward_hint() const;
  std::string backward_hint() const;
  // The residual stream entering block `layer`.
  std::span<const float> block_input(int layer) const;
  BlockTensors block_tensors_of(int layer);
  // Forward through block `layer`; with `rebuild_only`, only the steps whose outputs the block did
  // not keep (backward's recompute).
  void forward_block(int layer, TensorIn params, bool rebuild_only);
  // Books every block's tensors as the policy keeps them, and the shared copy of what checkpointed
  // blocks rebuild.
  void book_block_activations();
  void backward_block(int layer, TensorIn params, std::span<float> grads);
  Buffer activation(ActivationKind kind, Shape shape, DType dtype = DType::F32);
  bool sixteen_bit() const { return activation_dtype_ != DType::F32; }
  // The token rows [first, first + rows) of an [N, width] buffer.
  static void* rows_of(Buffer& buffer, std::int64_t first, std::int64_t width);
  // The LM head and the loss with 16-bit activations, chunk by chunk (gpt_head.cpp).
  void head_forward_chunked(TensorIn params);
  void loss_sum_chunked(float grad_scale, std::span<double> loss_sum);
  // The micro-batch's token losses summed in a device double, backward seeded: taken once.
  Buffer seeded_loss_sum(float grad_scale);
  void head_backward_chunked(TensorIn params, std::span<float> grads);

  Device& device_;
  GptConfig config_;
  ActivationPolicy policy_;
  DType activation_dtype_;  // what matrix products' inputs and outputs are kept in
  std::vector<UnitSpec> units_;
  std::vector<int> order_;
  // Per micro-batch, allocated in begin() (see gpt.cpp).
  std::int64_t rows_ = 0;
  std::int64_t seq_len_ = 0;
  Buffer tokens_;   // [rows, T] int64 input ids, on the device
  Buffer targets_;  // [rows, T] int64 next-token ids, on the device
  Buffer embedded_;                    // wte[token] + wpe[t] [N, C]
  std::vector<BlockActivations> blocks_;
  // One block's tensors that checkpointed blocks rebuild, shared by every block.
  BlockActivations work_;
  Buffer lnf_, lnf_mean_, lnf_rstd_;  // ln_f(last block's out) [N, C], [N], [N]
  Buffer logits_;  // [N, Vp]; after loss(), grad_scale * d loss / d logits in their place

  // Backward scratch, reused by every block.
  Buffer dresidual_;  // d loss / d the residual stream at the current block boundary [N, C]
  Buffer dln_;        // d loss / d a LayerNorm's output [N, C]
  Buffer dqkv_;       // [N, 3C]
  Buffer dattn_;      // [N, C]
  Buffer dfc_;        // [N, 4C]
  Buffer dfc_gelu_;   // [N, 4C]
  // Where the micro-batch is: visits of order_ run forward, the loss, the next backward visit.
  std::size_t forward_visits_ = 0;
  bool loss_done_ = false;  // the loss is taken and backward seeded
  bool loss_read_ = false;  // loss() read it into loss_
  float loss_ = 0.0f;
  int next_backward_visit_ = -1;
};

}  // namespace zl
