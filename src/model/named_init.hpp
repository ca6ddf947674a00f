// named_init.hpp — a model whose parameters start from given tensors (e.g. a consolidated
// checkpoint, `zerolab train --init FILE`) instead of its own random init. It wraps the model and
// forwards everything else, so engines need not know where the initial values came from.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "model/model.hpp"

namespace zl {

/// Values of named parameters: name -> (shape, row-major fp32 values, the file they came from).
struct NamedTensor {
  Shape shape;                ///< dimensions, outermost first
  std::vector<float> values;  ///< numel(shape) values, row-major
  std::string file;           ///< where it was read, for messages; empty: the model's `source`
};
/// Tensors by name, as read from a safetensors file.
using NamedTensors = std::map<std::string, NamedTensor>;

/// `model` with init_unit() copying from `tensors` (which must outlive it). Each tensor has its
/// parameter's real shape (ParamSpec::real_shape(): GPT-2's wte.weight [vocab, C]); padded rows
/// start at zero. Hugging Face GPT-2 files load as they are: names may carry the "transformer."
/// prefix, the `*.attn.bias` / `*.attn.masked_bias` mask buffers are ignored, and so is
/// `lm_head.weight` when it equals wte.weight (the head is tied to wte). Throws zl::Error naming
/// the tensor's file (or `source`, e.g. the --init folder) if a parameter is missing or has
/// another shape or a value that is not finite, `lm_head.weight` differs from wte.weight, or a
/// tensor is neither a parameter nor an Adam moment of one (consolidate --with-optimizer writes
/// those; they are ignored: --init starts the weights, not the optimizer).
class NamedInitModel final : public Model {
 public:
  /// Wraps `model` (which must outlive this); checks every name and shape here, before training.
  NamedInitModel(Model& model, const NamedTensors& tensors, const std::string& source);
  const std::vector<UnitSpec>& units() const override { return model_.units(); }
  void init_unit(int unit, std::span<float> flat, std::uint64_t seed) const override;
  std::vector<int> forward_order() const override { return model_.forward_order(); }
  void begin(const Batch& batch) override { model_.begin(batch); }
  void forward_unit(int unit, TensorIn params) override { model_.forward_unit(unit, params); }
  using Model::loss;
  float loss(float grad_scale) override { return model_.loss(grad_scale); }
  void add_loss(float grad_scale, std::span<float> loss_sum) override {
    model_.add_loss(grad_scale, loss_sum);
  }
  void backward_unit(int unit, TensorIn params, std::span<float> grads) override {
    model_.backward_unit(unit, params, grads);
  }

 private:
  // The tensor for parameter `name`, also under Hugging Face's "transformer." prefix; or nullptr.
  const std::pair<const std::string, NamedTensor>* find(const std::string& name) const;

  Model& model_;
  const NamedTensors& tensors_;
};

}  // namespace zl
