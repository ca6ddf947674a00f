// mlp.cpp — the MLP's units, its torch.nn.Linear init, and forward/backward one layer at a time.
// Per micro-batch it keeps the input, every layer's pre-activation and GELU output (the tensors
// backward needs), plus two gradient scratch buffers, all booked as Activations.
#include "model/mlp.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace zl {

namespace {

std::span<float> floats(Buffer& buffer, std::int64_t elems) {
  return buffer.as<float>().first(static_cast<std::size_t>(elems));
}
std::span<const float> floats(const Buffer& buffer) {
  return buffer.as<float>();
}

}  // namespace

void validate(const MlpConfig& config) {
  ZL_CHECK(config.layers >= 1, "--layers {} is invalid: the MLP needs at least 1 layer",
           config.layers);
  ZL_CHECK(config.width >= 1, "--width {} is invalid: every layer needs a size >= 1", config.width);
  ZL_CHECK(config.in >= 1, "--in {} is invalid: every layer needs a size >= 1", config.in);
  ZL_CHECK(config.classes >= 1, "--classes {} is invalid: every layer needs a size >= 1",
           config.classes);
}

Mlp::Mlp(Device& device, const MlpConfig& config) : device_(device), config_(config) {
  validate(config_);
  for (int i = 0; i < config_.layers; ++i) {
    const std::string name = fmt::format("layers.{}", i);
    units_.push_back(
        {name, {{name + ".weight", {out_of(i), in_of(i)}}, {name + ".bias", {out_of(i)}}}});
  }
}

std::int64_t Mlp::in_of(int unit) const {
  return unit == 0 ? config_.in : config_.width;
}
std::int64_t Mlp::out_of(int unit) const {
  return unit == last() ? config_.classes : config_.width;
}

void Mlp::init_unit(int unit, std::span<float> flat, std::uint64_t seed) const {
  ZL_CHECK(unit >= 0 && unit < config_.layers, "unit {} does not exist: the MLP has {} units", unit,
           config_.layers);
  const auto& spec = units_[static_cast<std::size_t>(unit)];
  ZL_CHECK(static_cast<std::int64_t>(flat.size()) >= spec.numel(),
           "init of {} got {} elements for its {} parameters", spec.name, flat.size(),
           spec.numel());
  // torch.nn.Linear.reset_parameters: kaiming_uniform(a=sqrt 5) on the weight and the bias
  // both come out as U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
  const float bound = static_cast<float>(1.0 / std::sqrt(static_cast<double>(in_of(unit))));
  std::size_t offset = 0;
  for (const auto& param : spec.params) {
    const std::uint64_t stream = stream_of(param.name);
    const auto elems = static_cast<std::uint64_t>(numel(param.shape));
    for (std::uint64_t e = 0; e < elems; ++e) {
      flat[offset + e] = (2.0f * uniform01(seed, stream, e) - 1.0f) * bound;
    }
    offset += elems;
  }
}

void Mlp::begin(const Batch& batch) {
  ZL_CHECK(batch.rows >= 1, "a micro-batch of {} rows is empty: pass >= 1 row", batch.rows);
  ZL_CHECK(batch.features == config_.in,
           "the batch has {} features but the MLP was built with --in {}", batch.features,
           config_.in);
  ZL_CHECK(static_cast<std::int64_t>(batch.x.size()) == batch.rows * batch.features &&
               static_cast<std::int64_t>(batch.y.size()) == batch.rows,
           "the batch holds {} x values and {} labels for {} rows of {} features", batch.x.size(),
           batch.y.size(), batch.rows, batch.features);
  // Release the last micro-batch before booking this one, so the ledger's peak is one batch.
  pre_.clear();
  post_.clear();
  input_ = Buffer();
  labels_ = Buffer();
  grad_pre_ = Buffer();
  grad_post_ = Buffer();

  rows_ = batch.rows;
  input_ = device_.alloc_activation(ActivationKind::Inputs, DType::F32, {rows_, config_.in});
  device_.copy_from_host(input_.data(), batch.x.data(), static_cast<std::size_t>(input_.bytes()));
  labels_ = device_.alloc_activation(ActivationKind::Inputs, DType::I64, {rows_});
  device_.copy_from_host(labels_.data(), batch.y.data(), static_cast<std::size_t>(labels_.bytes()));
  std::int64_t widest = 0;
  for (int i = 0; i < config_.layers; ++i) {
    pre_.push_back(device_.alloc_activation(ActivationKind::Block, DType::F32, {rows_, out_of(i)}));
    post_.push_back(i == last()
                        ? Buffer()
                        : device_.alloc_activation(ActivationKind::Block, DType::F32, {rows_, out_of(i)}));
    widest = std::max(widest, out_of(i));
  }
  // A layer's dx is [rows, in_i] and in_i is the previous layer's out, so `widest` fits both.
  grad_pre_ = device_.alloc_activation(ActivationKind::Scratch, DType::F32, {rows_, widest});
  grad_post_ = device_.alloc_activation(ActivationKind::Scratch, DType::F32, {rows_, widest});
  forwarded_units_ = 0;
  loss_done_ = false;
  loss_read_ = false;
  next_backward_unit_ = last();
}

void Mlp::forward_unit(int unit, TensorIn params) {
  ZL_CHECK(rows_ > 0 && unit == forwarded_units_ && unit < config_.layers,
           "forward_unit({}) out of order: call begin(), then forward_unit(0..{}) in turn", unit,
           last());
  const auto& spec = units_[static_cast<std::size_t>(unit)];
  ZL_CHECK(params.elems >= spec.numel(), "forward of {} got {} parameters, needs {}", spec.name,
           params.elems, spec.numel());
  const std::int64_t in = in_of(unit);
  const std::int64_t out = out_of(unit);
  // params holds weight [out, in] then bias [out]; anything after (partition padding) is unused.
  const TensorIn weight = params.first(out * in);
  const TensorIn bias = params.subspan(out * in, out);
  const auto x = unit == 0 ? floats(input_) : floats(post_[unit - 1]);
  auto& pre = pre_[unit];
  // pre is [rows, out] = x [rows, in] * weight^T + bias
  device_.linear_forward(x, weight, bias, pre.as<float>(), rows_, in, out);
  if (unit != last()) device_.gelu_forward(floats(pre), post_[unit].as<float>());
  ++forwarded_units_;
}

Buffer Mlp::seeded_loss_sum(float grad_scale) {
  ZL_CHECK(rows_ > 0 && forwarded_units_ == config_.layers,
           "loss() before the forward pass finished: {} of {} units ran", forwarded_units_,
           config_.layers);
  ZL_CHECK(!loss_done_,
           "the micro-batch's loss was taken already: call loss() or add_loss() once per "
           "micro-batch");
  // The logits are the last layer's output [rows, classes]; their gradient seeds backward.
  Buffer loss_sum = device_.alloc(MemCategory::CommBuffer, DType::F64, {1});
  const std::int64_t logits = rows_ * config_.classes;
  device_.cross_entropy_add_forward_backward(
      TensorIn(pre_[last()].data(), logits, DType::F32), labels_.as<std::int64_t>(),
      TensorOut(grad_pre_.data(), logits, DType::F32), rows_, config_.classes, config_.classes,
      rows_, loss_sum.as<double>(), grad_scale);
  loss_done_ = true;
  return loss_sum;
}

float Mlp::loss(float grad_scale) {
  if (loss_read_) return loss_;
  loss_ = device_.read_mean_loss(seeded_loss_sum(grad_scale).as<double>(), rows_);
  loss_read_ = true;
  return loss_;
}

void Mlp::add_loss(float grad_scale, std::span<float> loss_sum) {
  const Buffer sum = seeded_loss_sum(grad_scale);
  device_.add_mean_loss(sum.as<double>(), rows_, loss_sum);
}

void Mlp::backward_unit(int unit, TensorIn params, std::span<float> grads) {
  ZL_CHECK(loss_done_ && unit == next_backward_unit_ && unit >= 0,
           "backward_unit({}) out of order: call loss(), then backward_unit({}..0) in turn", unit,
           last());
  const auto& spec = units_[static_cast<std::size_t>(unit)];
  ZL_CHECK(params.elems >= spec.numel() && static_cast<std::int64_t>(grads.size()) >= spec.numel(),
           "backward of {} got {} parameters and {} gradients, needs {} of each", spec.name,
           params.elems, grads.size(), spec.numel());
  const std::int64_t in = in_of(unit);
  const std::int64_t out = out_of(unit);
  const auto weight_elems = static_cast<std::size_t>(out * in);
  const auto out_elems = static_cast<std::size_t>(out);

  // dpre is [rows, out]: for the last layer loss() already wrote it; below, undo the GELU.
  const auto dpre = floats(grad_pre_, rows_ * out);
  if (unit != last()) {
    device_.gelu_backward(floats(pre_[unit]), floats(grad_post_, rows_ * out), dpre);
  }
  // dx is [rows, in], the gradient of the layer below's output; layer 0's input needs none.
  const auto dx = unit == 0 ? std::span<float>() : floats(grad_post_, rows_ * in);
  const auto x = unit == 0 ? floats(input_) : floats(post_[unit - 1]);
  device_.linear_backward(x, params.first(out * in), dpre, grads.first(weight_elems),
                          grads.subspan(weight_elems, out_elems), dx, rows_, in, out);
  --next_backward_unit_;
}

}  // namespace zl
