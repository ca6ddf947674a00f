// gpt.cpp — GPT-2's units, init, call-order checks, the embedding, ln_f and the tied LM head; the
// blocks are in gpt_block.cpp, the 16-bit head in gpt_head.cpp. Per micro-batch it books every
// activation backward needs (the llm.c layout: each LayerNorm's output, mean and rstd, qkv,
// attention's row statistics, the MLP's pre- and post-GELU values, each residual) plus a few
// gradient scratch buffers, as Activations.
#include "model/gpt.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/host_convert.hpp"
#include "core/rng.hpp"

namespace zl {

namespace {

constexpr double kInitStd = 0.02;  // GPT2Config.initializer_range

}  // namespace

Gpt::Gpt(Device& device, const GptConfig& config, ActivationPolicy policy, DType activation_dtype)
    : device_(device),
      config_(config),
      policy_(policy),
      activation_dtype_(activation_dtype),
      units_(gpt_units(config)) {
  ZL_CHECK(activation_dtype == DType::F32 || activation_dtype == DType::BF16 ||
               activation_dtype == DType::F16,
           "GPT activations in {} are not supported: keep them in fp32, bf16 or fp16",
           dtype_name(activation_dtype));
  ZL_CHECK(policy.every_blocks >= 1,
           "activation checkpointing every:{} is invalid: checkpoint every K >= 1 blocks",
           policy.every_blocks);
  ZL_CHECK(!policy.cpu_checkpoints || policy.recompute == Recompute::Full,
           "--cpu-checkpointing keeps full checkpoints in host memory: use it with "
           "--activation-checkpointing full or every:K, not {}",
           activation_policy_name(policy));
  order_ = gpt_forward_order(config);
}

void Gpt::init_unit(int unit, std::span<float> flat, std::uint64_t seed) const {
  ZL_CHECK(unit >= 0 && unit <= last_unit(), "unit {} does not exist: the GPT has {} units", unit,
           units_.size());
  const auto& spec = units_[static_cast<std::size_t>(unit)];
  ZL_CHECK(static_cast<std::int64_t>(flat.size()) >= spec.numel(),
           "init of {} got {} elements for its {} parameters", spec.name, flat.size(),
           spec.numel());
  // GPT-2's scaled init: each block adds two c_proj outputs to the residual stream, so their
  // weights shrink by 1/sqrt(2 n_layer) to keep the stream's variance independent of depth.
  const double proj_std = kInitStd / std::sqrt(2.0 * config_.n_layer);
  std::size_t offset = 0;
  for (const auto& param : spec.params) {
    const auto elems = static_cast<std::size_t>(numel(param.shape));
    // wte's padded rows, after its real ones, are zero; the real ones draw the same values as
    // without padding (element e of the [V, C] tensor is element e of the stream).
    const auto real_elems = static_cast<std::size_t>(numel(param.real_shape()));
    std::fill(flat.begin() + static_cast<std::ptrdiff_t>(offset + real_elems),
              flat.begin() + static_cast<std::ptrdiff_t>(offset + elems), 0.0f);
    const auto values = flat.subspan(offset, real_elems);
    offset += elems;
    const std::string_view name = param.name;
    if (name.ends_with(".bias")) {
      std::fill(values.begin(), values.end(), 0.0f);
    } else if (name.starts_with("ln_") || name.find(".ln_") != std::string_view::npos) {
      std::fill(values.begin(), values.end(), 1.0f);  // a LayerNorm weight
    } else {
      const double stddev = name.ends_with("c_proj.weight") ? proj_std : kInitStd;
      const std::uint64_t stream = stream_of(name);
      for (std::size_t e = 0; e < real_elems; ++e)
        values[e] = static_cast<float>(stddev * standard_normal(seed, stream, e));
    }
  }
}

Buffer Gpt::activation(ActivationKind kind, Shape shape, DType dtype) {
  // Every activation is written whole before it is read (the residual stream's gradient is
  // zeroed where it starts, at ln_f's backward): no zeroing.
  return device_.alloc_activation_unset(kind, dtype, std::move(shape));
}

void Gpt::begin(const Batch& batch) {
  const std::int64_t T = batch.features;
  ZL_CHECK(batch.rows >= 1, "a micro-batch of {} rows is empty: pass >= 1 row", batch.rows);
  ZL_CHECK(T >= 1 && T <= config_.block_size,
           "a sequence length of {} tokens does not fit the GPT: use 1 .. --block-size {}", T,
           config_.block_size);
  ZL_CHECK(static_cast<std::int64_t>(batch.tokens.size()) == batch.rows * T &&
               static_cast<std::int64_t>(batch.y.size()) == batch.rows * T,
           "the batch holds {} tokens and {} targets for {} rows of {} tokens: a GPT batch needs "
           "tokens and y of rows * T each",
           batch.tokens.size(), batch.y.size(), batch.rows, T);
  for (std::int64_t i = 0; i < batch.rows * T; ++i) {
    for (const auto* ids : {&batch.tokens, &batch.y}) {
      const std::int64_t id = (*ids)[static_cast<std::size_t>(i)];
      ZL_CHECK(id >= 0 && id < config_.vocab,
               "{} {} at row {}, position {} is outside the vocabulary [0, {}): use ids below "
               "--vocab",
               ids == &batch.tokens ? "token" : "target", id, i / T, i % T, config_.vocab);
    }
  }
  // Release the last micro-batch before booking this one, so the ledger's peak is one batch.
  blocks_.clear();
  work_ = BlockActivations();
  for (Buffer* buffer : {&tokens_, &targets_, &embedded_, &lnf_, &lnf_mean_, &lnf_rstd_, &logits_,
                         &dresidual_, &dln_, &dqkv_, &dattn_, &dfc_, &dfc_gelu_})
    *buffer = Buffer();

  rows_ = batch.rows;
  seq_len_ = T;
  const std::int64_t N = token_rows(), C = config_.n_embd;
  // The ids go to the device once per micro-batch, booked with the activations.
  tokens_ = device_.alloc_activation_unset(ActivationKind::Inputs, DType::I64, {rows_, T});
  targets_ = device_.alloc_activation_unset(ActivationKind::Inputs, DType::I64, {rows_, T});
  device_.copy_from_host(tokens_.data(), batch.tokens.data(),
                         static_cast<std::size_t>(tokens_.bytes()));
  device_.copy_from_host(targets_.data(), batch.y.data(),
                         static_cast<std::size_t>(targets_.bytes()));
  embedded_ = activation(ActivationKind::Inputs, {N, C});
  book_block_activations();
  // ln_f's output and the logits are a matrix product's input and output: 16 bits when the
  // activations are.
  lnf_ = activation(ActivationKind::Logits, {N, C}, activation_dtype_);
  lnf_mean_ = activation(ActivationKind::Logits, {N});
  lnf_rstd_ = activation(ActivationKind::Logits, {N});
  // The logits have a column for every row of the padded wte (padded_vocab(), a multiple of 128
  // that keeps the head's matrix product aligned); the padded columns are masked in the loss.
  logits_ = activation(ActivationKind::Logits, {N, padded_vocab(config_)}, activation_dtype_);

  dresidual_ = activation(ActivationKind::Scratch, {N, C});
  dln_ = activation(ActivationKind::Scratch, {N, C});
  dqkv_ = activation(ActivationKind::Scratch, {N, 3 * C});
  dattn_ = activation(ActivationKind::Scratch, {N, C});
  dfc_ = activation(ActivationKind::Scratch, {N, 4 * C});
  dfc_gelu_ = activation(ActivationKind::Scratch, {N, 4 * C});
  forward_visits_ = 0;
  loss_done_ = false;
  loss_read_ = false;
  next_backward_visit_ = static_cast<int>(order_.size()) - 1;
}

void Gpt::book_block_activations() {
  const std::int64_t N = token_rows(), C = config_.n_embd, T = seq_len_;
  struct Tensor {
    Buffer BlockActivations::*member;
    ActivationKind kind;
    Shape shape;
    bool kept_by_selective;  // a matrix product's output (or the block's): selective keeps it
    bool product_side;       // a matrix product's input or output: 16 bits when activations are
  };
  using A = BlockActivations;
  using K = ActivationKind;
  const Tensor tensors[] = {
      {&A::ln1, K::Block, {N, C}, false, true},
      {&A::ln1_mean, K::Block, {N}, false, false},
      {&A::ln1_rstd, K::Block, {N}, false, false},
      {&A::qkv, K::Block, {N, 3 * C}, true, true},
      {&A::att_stats, K::Attention, {rows_, config_.n_head, T, kAttentionStatsPerRow}, false,
       false},
      {&A::attn, K::Block, {N, C}, false, true},
      {&A::mid, K::Block, {N, C}, true, false},
      {&A::ln2, K::Block, {N, C}, false, true},
      {&A::ln2_mean, K::Block, {N}, false, false},
      {&A::ln2_rstd, K::Block, {N}, false, false},
      {&A::fc, K::MlpHidden, {N, 4 * C}, true, true},
      {&A::fc_gelu, K::MlpHidden, {N, 4 * C}, false, true},
      {&A::out, K::Block, {N, C}, true, false},
  };
  // What a checkpointed block keeps: its output only (full), or the products' outputs too.
  auto kept_when_checkpointed = [&](const Tensor& tensor) {
    return tensor.member == &A::out ||
           (policy_.recompute == Recompute::Selective && tensor.kept_by_selective);
  };
  auto kept_dtype = [&](const Tensor& tensor) {
    return tensor.product_side ? activation_dtype_ : DType::F32;
  };
  for (int l = 0; l < config_.n_layer; ++l) {
    BlockActivations block;
    const bool checkpointed = policy_.recomputes(l);
    for (const Tensor& tensor : tensors) {
      if (checkpointed && !kept_when_checkpointed(tensor)) continue;
      // A fully checkpointed block's output is the checkpoint the next block restarts from;
      // with CPU checkpointing it is kept in host memory.
      const bool checkpoint = checkpointed && policy_.recompute == Recompute::Full;
      if (checkpoint && policy_.cpu_checkpoints) {
        block.*tensor.member = device_.alloc(MemCategory::HostActivations, DType::F32, tensor.shape);
      } else {
        block.*tensor.member =
            activation(checkpoint ? K::Checkpoint : tensor.kind, tensor.shape, kept_dtype(tensor));
      }
    }
    blocks_.push_back(std::move(block));
  }
  // One block's worth of what checkpointed blocks rebuild, in the dtypes blocks keep them in,
  // shared by every block.
  if (policy_.recompute == Recompute::None) return;
  for (const Tensor& tensor : tensors) {
    if (!kept_when_checkpointed(tensor)) {
      work_.*tensor.member = activation(K::Recompute, tensor.shape, kept_dtype(tensor));
    }
  }
}

void Gpt::check_params(const char* pass, int unit, TensorIn params, std::size_t grads_elems) const {
  const auto& spec = units_[static_cast<std::size_t>(unit)];
  ZL_CHECK(params.elems >= spec.numel() && static_cast<std::int64_t>(grads_elems) >= spec.numel(),
           "{} of {} got {} parameters and {} gradient elements, needs {}", pass, spec.name,
           params.elems, grads_elems, spec.numel());
}

std::span<const float> Gpt::block_input(int layer) const {
  return layer == 0 ? embedded_.as<float>() : blocks_[layer - 1].out.as<float>();
}

std::string Gpt::forward_hint() const {
  if (rows_ == 0) return "begin() has not run";
  if (forward_visits_ == order_.size()) return "the forward pass is done: call loss()";
  return fmt::format("unit {} is next", order_[forward_visits_]);
}

std::string Gpt::backward_hint() const {
  if (!loss_done_) return "loss() has not run";
  if (next_backward_visit_ < 0) return "the backward pass is done: call begin() for the next batch";
  return fmt::format("unit {} is next", order_[next_backward_visit_]);
}

void Gpt::forward_unit(int unit, TensorIn params) {
  ZL_CHECK(rows_ > 0 && forward_visits_ < order_.size() && unit == order_[forward_visits_],
           "forward_unit({}) out of order: call begin(), then forward_unit for each unit of "
           "forward_order() (0, 1, ..., {}, 0) in turn; {}",
           unit, last_unit(), forward_hint());
  check_params("forward", unit, params, static_cast<std::size_t>(units_[unit].numel()));
  const std::int64_t N = token_rows(), C = config_.n_embd, V = config_.vocab;
  const std::int64_t Vp = padded_vocab(config_);
  const bool head = forward_visits_ + 1 == order_.size();
  if (unit == 0 && !head) {
    // x [N, C] = wte[token] + wpe[t]: wte [Vp, C] of which the V real rows are looked up, then
    // wpe [block_size, C] of which T rows are used.
    device_.embedding_forward(tokens_.as<std::int64_t>(), params.first(V * C),
                              params.subspan(Vp * C, seq_len_ * C), embedded_.as<float>(), rows_,
                              seq_len_, C, V);
  } else if (unit == 0 && sixteen_bit()) {
    head_forward_chunked(params);
  } else if (unit == 0) {
    // The tied LM head: logits [N, Vp] = ln_f(x) [N, C] * wte^T [C, Vp], no bias; the padded
    // columns [V, Vp) come out zero (their wte rows are) and the loss ignores them.
    device_.linear_forward(lnf_.as<float>(), params.first(Vp * C), {}, logits_.as<float>(), N, C,
                           Vp);
  } else if (unit == last_unit()) {
    device_.layernorm_forward(blocks_.back().out.as<float>(), params.first(C), params.subspan(C, C),
                              lnf_, lnf_mean_.as<float>(), lnf_rstd_.as<float>(), N, C);
  } else {
    forward_block(unit - 1, params, false);
  }
  ++forward_visits_;
}

std::vector<float> Gpt::logits() const {
  ZL_CHECK(rows_ > 0 && forward_visits_ == order_.size(),
           "logits() before the LM head ran: {} of {} forward visits done", forward_visits_,
           order_.size());
  ZL_CHECK(!loss_done_,
           "logits() after loss(): the logits' buffer now holds their gradient; read them before "
           "loss()");
  std::vector<std::byte> kept(static_cast<std::size_t>(logits_.bytes()));
  device_.copy_to_host(kept.data(), logits_.data(), kept.size());
  std::vector<float> padded(static_cast<std::size_t>(logits_.elems()));
  convert_on_host(kept.data(), logits_.dtype(), padded.data(), DType::F32, logits_.elems());
  // Each token row [Vp] keeps its first V columns: the padded ones are not the model's.
  const std::int64_t V = config_.vocab, Vp = padded_vocab(config_);
  std::vector<float> host(static_cast<std::size_t>(token_rows() * V));
  for (std::int64_t r = 0; r < token_rows(); ++r) {
    std::copy_n(padded.begin() + r * Vp, V, host.begin() + r * V);
  }
  return host;
}

Buffer Gpt::seeded_loss_sum(float grad_scale) {
  ZL_CHECK(rows_ > 0 && forward_visits_ == order_.size(),
           "loss() before the forward pass finished: {} of {} forward visits ran", forward_visits_,
           order_.size());
  ZL_CHECK(!loss_done_,
           "the micro-batch's loss was taken already: call loss() or add_loss() once per "
           "micro-batch");
  // Booked as the norm's partials are.
  Buffer loss_sum = device_.alloc(MemCategory::CommBuffer, DType::F64, {1});
  if (sixteen_bit()) {
    loss_sum_chunked(grad_scale, loss_sum.as<double>());
  } else {
    // Mean over all N = rows * T tokens; the gradient (softmax - onehot) / N, scaled, is written
    // over the logits, which nothing reads again (as llm.c does): one [N, Vp] buffer. The softmax
    // covers the V real columns; the padded ones get a zero gradient.
    const std::int64_t N = token_rows(), Vp = padded_vocab(config_);
    const TensorOut logits(logits_.data(), N * Vp, DType::F32);
    device_.cross_entropy_add_forward_backward(logits, targets_.as<std::int64_t>(), logits, N,
                                               config_.vocab, Vp, N, loss_sum.as<double>(),
                                               grad_scale);
  }
  loss_done_ = true;
  return loss_sum;
}

float Gpt::loss(float grad_scale) {
  if (loss_read_) return loss_;
  loss_ = device_.read_mean_loss(seeded_loss_sum(grad_scale).as<double>(), token_rows());
  loss_read_ = true;
  return loss_;
}

void Gpt::add_loss(float grad_scale, std::span<float> loss_sum) {
  const Buffer sum = seeded_loss_sum(grad_scale);
  device_.add_mean_loss(sum.as<double>(), token_rows(), loss_sum);
}

void Gpt::backward_unit(int unit, TensorIn params, std::span<float> grads) {
  ZL_CHECK(loss_done_ && next_backward_visit_ >= 0 && unit == order_[next_backward_visit_],
           "backward_unit({}) out of order: call loss(), then backward_unit for each unit of "
           "forward_order() reversed (0, {}, ..., 1, 0) in turn; {}",
           unit, last_unit(), backward_hint());
  check_params("backward", unit, params, grads.size());
  const std::int64_t N = token_rows(), C = config_.n_embd, V = config_.vocab;
  const std::int64_t Vp = padded_vocab(config_);
  const bool head = next_backward_visit_ + 1 == static_cast<int>(order_.size());
  if (unit == 0 && head && sixteen_bit()) {
    head_backward_chunked(params, grads);
  } else if (unit == 0 && head) {
    // d wte [Vp, C] += dlogits^T ln_f(x) (the padded rows add dlogits' zero columns: 0);
    // d ln_f(x) [N, C] = dlogits wte.
    device_.linear_backward(lnf_.as<float>(), params.first(Vp * C), logits_.as<float>(),
                            grads.first(Vp * C), {}, dln_.as<float>(), N, C, Vp);
  } else if (unit == 0) {
    // dresidual now holds d loss / d (wte[token] + wpe[t]); tokens are real rows of wte.
    device_.embedding_backward(tokens_.as<std::int64_t>(), dresidual_.as<float>(),
                               grads.first(V * C), grads.subspan(Vp * C, seq_len_ * C), rows_,
                               seq_len_, C, V);
  } else if (unit == last_unit()) {
    // The residual stream's gradient starts here: ln_f's input gets only ln_f's part.
    auto dresidual = dresidual_.as<float>();
    device_.fill_zero(dresidual.data(), dresidual.size_bytes());
    device_.layernorm_backward(blocks_.back().out.as<float>(), params.first(C),
                               lnf_mean_.as<float>(), lnf_rstd_.as<float>(), dln_.as<float>(),
                               dresidual, grads.first(C), grads.subspan(C, C), N, C);
  } else {
    backward_block(unit - 1, params, grads);
  }
  --next_backward_visit_;
}

}  // namespace zl
