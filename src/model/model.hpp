// model.hpp — what an engine needs from a model: its parameters grouped in units (the pieces
// ZeRO-3 gathers one at a time), a deterministic init, and forward/backward one unit at a time.
// A unit's parameters live back to back in one flat fp32 buffer, in the order of `params`.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/buffer.hpp"
#include "core/error.hpp"
#include "ops/tensor_view.hpp"

namespace zl {

/// `shape` without its last `pad_rows` rows (outermost dimension): the shape files in Hugging
/// Face's layout hold. Throws zl::Error unless pad_rows is 0, or 0 < pad_rows < shape[0].
inline Shape real_shape(const Shape& shape, std::int64_t pad_rows) {
  if (pad_rows == 0) return shape;
  ZL_CHECK(pad_rows > 0 && !shape.empty() && pad_rows < shape[0],
           "{} padded rows do not fit a tensor of shape {}: pad fewer rows than it has", pad_rows,
           shape_string(shape));
  Shape real = shape;
  real[0] -= pad_rows;
  return real;
}

/// One named parameter tensor (Hugging Face / PyTorch names and shapes).
struct ParamSpec {
  std::string name;  ///< stable name, e.g. "layers.0.weight" or "h.1.attn.c_attn.weight"
  Shape shape;       ///< dimensions in memory, outermost first, as PyTorch stores the tensor
  /// Zero rows at the end of `shape` that are not part of the model: GPT-2's wte is padded from
  /// the vocabulary V to padded_vocab() rows, so shape is [padded_vocab, C] and pad_rows is
  /// padded_vocab - V. They stay zero, and files in Hugging Face's shapes leave them out.
  std::int64_t pad_rows = 0;
  /// The shape without the padded rows: what consolidate, --save-final and --init show.
  Shape real_shape() const { return zl::real_shape(shape, pad_rows); }
};

/// A group of parameters gathered, computed and reduced together.
struct UnitSpec {
  std::string name;               ///< stable name, e.g. "layers.0" or "h.1"
  std::vector<ParamSpec> params;  ///< in the order they lie in the unit's flat buffer
  /// Elements of all params together (the flat size before partition.hpp's padding; padded
  /// rows of a parameter, ParamSpec::pad_rows, included).
  std::int64_t numel() const {
    std::int64_t count = 0;
    for (const auto& param : params) count += zl::numel(param.shape);
    return count;
  }
  /// The model's parameters in the unit, without the padded rows (Hugging Face's count).
  std::int64_t real_numel() const {
    std::int64_t count = 0;
    for (const auto& param : params) count += zl::numel(param.real_shape());
    return count;
  }
};

/// One micro-batch. Classification (MLP): x [rows, features] and labels y [rows]. Language
/// modelling (GPT): tokens [rows, features] (features is the sequence length) and next tokens
/// y [rows, features]; x stays empty.
struct Batch {
  std::int64_t rows = 0;             ///< samples (sequences for GPT) in the micro-batch
  std::int64_t features = 0;         ///< MLP: inputs per sample; GPT: tokens per sequence
  std::vector<float> x;              ///< MLP inputs, rows * features, row-major; empty for GPT
  std::vector<std::int64_t> y;       ///< MLP: one label in [0, classes) per row; GPT: next tokens
  std::vector<std::int64_t> tokens;  ///< GPT input tokens, rows * features; empty for the MLP
};

/// A model trained by the engines. Calls for one micro-batch go:
///   begin(batch); forward_unit(u) for u in forward_order(); loss();
///   backward_unit(u) for u in forward_order() reversed.
/// A unit may run more than once: GPT-2's token embedding runs first and again, last, as the tied
/// LM head; its gradients from both visits add into the same buffer.
/// The model keeps the activations it needs (booked as Activations on its device) between them.
class Model {
 public:
  virtual ~Model() = default;

  /// The units in forward order, with their parameters.
  virtual const std::vector<UnitSpec>& units() const = 0;

  /// The units in the order they run forward (default 0..U-1); backward runs it reversed.
  virtual std::vector<int> forward_order() const {
    std::vector<int> order(units().size());
    for (std::size_t u = 0; u < order.size(); ++u) order[u] = static_cast<int>(u);
    return order;
  }

  /// Fills the unpadded flat parameters of unit `unit` from `seed` (same for every W and backend).
  virtual void init_unit(int unit, std::span<float> flat, std::uint64_t seed) const = 0;

  /// Starts a micro-batch.
  virtual void begin(const Batch& batch) = 0;

  /// Runs unit `unit` forward with its flat parameters, in the training dtype (fp32, or bf16 or
  /// fp16 under mixed precision: the kernels read them as they are kept).
  virtual void forward_unit(int unit, TensorIn params) = 0;

  /// Loss of the micro-batch (mean over its rows, or its tokens); seeds the backward pass with the
  /// gradient of grad_scale * loss, so backward yields scaled gradients (loss scaling, and 1/k
  /// for k accumulated micro-batches). Returns the unscaled loss. Asking again returns it again.
  virtual float loss(float grad_scale) = 0;

  /// loss(1.0f).
  float loss() { return loss(1.0f); }

  /// loss(grad_scale) without reading it: seeds backward the same way and adds the unscaled loss,
  /// rounded to float, into loss_sum[0] (one float in the device's memory; one float addition), so
  /// a step reads its micro-batches' losses once, after the last. A micro-batch's loss is taken
  /// once: by loss() (which may be asked again) or by add_loss().
  virtual void add_loss(float grad_scale, std::span<float> loss_sum) = 0;

  /// Runs unit `unit` backward, adding its parameter gradients into the fp32 `grads` (same layout
  /// as params).
  virtual void backward_unit(int unit, TensorIn params, std::span<float> grads) = 0;
};

}  // namespace zl
