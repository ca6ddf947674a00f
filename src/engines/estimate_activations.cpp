// estimate_activations.cpp — the activation bytes the models book per micro-batch, shape by shape
// as Gpt::begin and Mlp::begin allocate them (fp32 or 16-bit values, int64 ids), summed by kind.
#include "engines/estimate_activations.hpp"

#include <algorithm>
#include <numeric>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/dtype.hpp"
#include "engines/checked_math.hpp"
#include "model/gpt.hpp"
#include "ops/device.hpp"

namespace zl {

namespace {

constexpr std::int64_t kF32 = 4;  // bytes of an fp32 activation
constexpr std::int64_t kI64 = 8;  // bytes of a token id, target or label

// Products and sums that fail in one line instead of wrapping.
constexpr std::string_view kTooLarge =
    "the activations are too large to estimate: use a smaller --micro-batch or --block-size";

std::int64_t mul(std::int64_t a, std::int64_t b) { return checked_mul(a, b, kTooLarge); }

std::int64_t mul(std::int64_t a, std::int64_t b, std::int64_t c) { return mul(mul(a, b), c); }

std::int64_t add(std::int64_t a, std::int64_t b) { return checked_add(a, b, kTooLarge); }

void check_micro_batch(std::int64_t micro_batch) {
  ZL_CHECK(micro_batch >= 1, "--micro-batch {} is invalid: use 1 or more rows per rank",
           micro_batch);
}

std::int64_t& at(ActivationEstimate& estimate, ActivationKind kind) {
  return estimate.bytes[static_cast<int>(kind)];
}

// The GPT's sum in its symbols, fp32 activations: "16BT + 4[L(16BTC + 4BT + 2BHT) + ...]".
std::string gpt_formula_32(std::int64_t kept, std::int64_t rebuilt, const ActivationPolicy& policy) {
  if (policy.recompute == Recompute::None) {
    return "16BT + 4[L(16BTC + 4BT + 2BHT) + 16BTC + 2BT + BTVp]";
  }
  const std::string whole = "(16BTC + 4BT + 2BHT)";
  std::string blocks = kept == 0 ? "" : fmt::format("{}{} + ", kept == 1 ? "" : fmt::format("{}·", kept), whole);
  if (policy.recompute == Recompute::Selective) {
    blocks += fmt::format("{}·9BTC + (7BTC + 4BT + 2BHT) + ", rebuilt);
  } else {  // the checkpoints themselves, unless they are on the host
    blocks += policy.cpu_checkpoints ? "" : fmt::format("{}·BTC + ", rebuilt);
    blocks += "(15BTC + 4BT + 2BHT) + ";
  }
  return fmt::format("16BT + 4[{}16BTC + 2BT + BTVp]", blocks);
}

// The same in bytes with 16-bit activations.
std::string gpt_formula_16(std::int64_t kept, std::int64_t rebuilt, const ActivationPolicy& policy) {
  const std::string whole = "(36BTC + 16BT + 8BHT)";
  std::string blocks;
  if (policy.recompute == Recompute::None) {
    return "24BT + L" + whole + " + 62BTC + 2BTVp";
  } else {
    if (kept > 0) blocks = fmt::format("{}{} + ", kept == 1 ? "" : fmt::format("{}·", kept), whole);
    if (policy.recompute == Recompute::Selective) {
      blocks += fmt::format("{}·22BTC + (14BTC + 16BT + 8BHT) + ", rebuilt);
    } else {
      blocks += policy.cpu_checkpoints ? "" : fmt::format("{}·4BTC + ", rebuilt);
      blocks += "(32BTC + 16BT + 8BHT) + ";
    }
  }
  return fmt::format("24BT + {}62BTC + 2BTVp", blocks);
}

}  // namespace

std::int64_t ActivationEstimate::total_bytes() const {
  return std::accumulate(bytes.begin(), bytes.end(), std::int64_t{0}, add);
}

ActivationEstimate estimate_activations(const GptConfig& config, std::int64_t micro_batch,
                                        std::int64_t seq_len, const ActivationPolicy& policy,
                                        DType activation_dtype) {
  validate(config);
  check_micro_batch(micro_batch);
  ZL_CHECK(seq_len >= 1 && seq_len <= config.block_size,
           "a sequence of {} tokens does not fit the GPT: use 1 .. --block-size {}", seq_len,
           config.block_size);
  ZL_CHECK(policy.every_blocks >= 1,
           "activation checkpointing every:{} is invalid: checkpoint every K >= 1 blocks",
           policy.every_blocks);
  ZL_CHECK(is_training_dtype(activation_dtype),
           "GPT activations in {} are not supported: keep them in fp32, bf16 or fp16",
           dtype_name(activation_dtype));
  // The logits have a column for each row of the padded wte: Vp = padded_vocab(), not the vocab.
  const std::int64_t H = config.n_head, C = config.n_embd, Vp = padded_vocab(config);
  const std::int64_t N = mul(micro_batch, seq_len);  // token rows, B*T
  const std::int64_t NC = mul(N, C);
  // A matrix product's input or output: 4 bytes, or 2 when the activations are 16-bit.
  const auto kP = static_cast<std::int64_t>(dtype_bytes(activation_dtype));
  const bool sixteen = kP != kF32;
  // Attention keeps two floats per query row and head (its largest score and sum of exps).
  const std::int64_t BHT2 = mul(mul(micro_batch, H), mul(seq_len, kAttentionStatsPerRow));
  // Blocks that keep everything, and blocks that rebuild in backward (0, K, 2K, ...).
  std::int64_t rebuilt = 0;
  for (int l = 0; l < config.n_layer; ++l) rebuilt += policy.recomputes(l) ? 1 : 0;
  const std::int64_t kept = config.n_layer - rebuilt;
  const bool selective = policy.recompute == Recompute::Selective;
  ActivationEstimate out;
  // tokens and targets [B, T] in int64; embedded [N, C], block 0's input.
  at(out, ActivationKind::Inputs) = add(mul(2 * kI64, N), mul(kF32, NC));
  // A whole block: ln1, attn, ln2 [N, C] and qkv [N, 3C] (products' sides: 6NC), the residual
  // sums mid and out [N, C] (fp32: 2NC), both LayerNorms' mean and rstd (4N). A selective one
  // keeps qkv, mid and out.
  const std::int64_t whole_block = add(add(mul(kP, 6, NC), mul(kF32, 2, NC)), mul(kF32, 4, N));
  const std::int64_t selective_block = add(mul(kP, 3, NC), mul(kF32, 2, NC));
  at(out, ActivationKind::Block) =
      add(mul(kept, whole_block), selective ? mul(rebuilt, selective_block) : 0);
  at(out, ActivationKind::Attention) = mul(kept, kF32, BHT2);
  // fc and fc_gelu [N, 4C]; a selective block keeps fc.
  at(out, ActivationKind::MlpHidden) =
      add(mul(kept, kP, mul(8, NC)), selective ? mul(rebuilt, kP, mul(4, NC)) : 0);
  // lnf [N, C] with its mean and rstd [N]; the logits [N, Vp], their gradient written over them.
  at(out, ActivationKind::Logits) = add(mul(kP, add(NC, mul(N, Vp))), mul(kF32, 2, N));
  // dresidual, dln, dattn [N, C], dqkv [N, 3C], dfc and dfc_gelu [N, 4C]: 14NC.
  at(out, ActivationKind::Scratch) = mul(kF32, mul(14, NC));
  // A fully checkpointed block keeps its output [N, C], the next block's input.
  // With CPU checkpointing they are host bytes instead.
  if (!selective) {
    (policy.cpu_checkpoints ? out.host_bytes : at(out, ActivationKind::Checkpoint)) =
        mul(rebuilt, kF32, NC);
  }
  // One block's worth of what rebuilt blocks do not keep, in the dtypes blocks keep it in:
  // everything but the output (the products' sides 14NC, mid NC, 4N + 2BHT), or the LayerNorms,
  // attention's core and GELU (ln1, attn, ln2 and fc_gelu: 7NC of products' sides).
  if (rebuilt > 0) {
    at(out, ActivationKind::Recompute) =
        add(mul(kP, mul(selective ? 7 : 14, NC)),
            mul(kF32, add(add(selective ? 0 : NC, mul(4, N)), BHT2)));
  }

  out.formula = sixteen ? gpt_formula_16(kept, rebuilt, policy) : gpt_formula_32(kept, rebuilt, policy);
  return out;
}

ActivationEstimate estimate_activations(const MlpConfig& config, std::int64_t micro_batch) {
  validate(config);
  check_micro_batch(micro_batch);
  const std::int64_t L = config.layers, W = config.width, K = config.classes;
  const std::int64_t R = micro_batch;
  // The widest layer output: the scratch gradients hold any layer's dx and dy.
  const std::int64_t widest = L > 1 ? std::max(W, K) : K;
  ActivationEstimate out;
  at(out, ActivationKind::Inputs) = add(mul(kF32, R, config.in), mul(kI64, R));  // x [R, in], labels [R]
  // Every layer's pre-activation [R, out]; every hidden layer's post-activation [R, W].
  at(out, ActivationKind::Block) = mul(kF32, R, add(mul(2 * (L - 1), W), K));
  at(out, ActivationKind::Scratch) = mul(2 * kF32, R, widest);  // grad_pre and grad_post [R, widest]
  out.formula = L > 1 ? "4B·in + 8B + 4B[2(L-1)W + K] + 8B·max(W, K)" : "4B·in + 8B + 4BK + 8BK";
  return out;
}

}  // namespace zl
