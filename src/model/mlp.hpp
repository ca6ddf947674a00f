// mlp.hpp — a multi-layer perceptron for classification: Linear layers with GELU (erf form, as
// torch.nn.GELU()) between them and cross-entropy (mean over the micro-batch) on the logits.
// Layer i is one unit holding `layers.{i}.weight` [out, in] and `layers.{i}.bias` [out], in the
// layout of torch.nn.Linear. Dimensions: in -> width -> ... -> width -> classes.
#pragma once

#include <cstdint>
#include <vector>

#include "model/model.hpp"
#include "ops/device.hpp"

namespace zl {

/// Shape of an MLP. `layers` Linear layers (1 means a single in -> classes layer).
struct MlpConfig {
  int layers = 3;            ///< Linear layers, one unit each ("layers.0", ...)
  std::int64_t width = 64;   ///< outputs of every layer but the last
  std::int64_t in = 16;      ///< inputs of the first layer (features per sample)
  std::int64_t classes = 8;  ///< outputs of the last layer (logits)
};

/// Throws zl::Error with a one-line message if any size is < 1.
void validate(const MlpConfig& config);

/// The MLP. Activations are allocated on `device` (category Activations) per micro-batch.
class Mlp final : public Model {
 public:
  /// Builds the unit list for `config` (validated); parameters live in the engine, not here.
  Mlp(Device& device, const MlpConfig& config);
  const std::vector<UnitSpec>& units() const override { return units_; }
  /// torch.nn.Linear's default init: weight and bias ~ U(-1/sqrt(in), 1/sqrt(in)), element e of
  /// parameter `name` drawn as uniform01(seed, stream_of(name), e).
  void init_unit(int unit, std::span<float> flat, std::uint64_t seed) const override;
  void begin(const Batch& batch) override;
  void forward_unit(int unit, TensorIn params) override;
  using Model::loss;
  float loss(float grad_scale) override;
  void add_loss(float grad_scale, std::span<float> loss_sum) override;
  void backward_unit(int unit, TensorIn params, std::span<float> grads) override;

 private:
  // Input and output widths of layer `unit`.
  std::int64_t in_of(int unit) const;
  std::int64_t out_of(int unit) const;
  int last() const { return config_.layers - 1; }

  Device& device_;
  MlpConfig config_;
  std::vector<UnitSpec> units_;
  // Per micro-batch, allocated in begin() and kept until the next begin() (see mlp.cpp).
  std::int64_t rows_ = 0;
  Buffer input_;   // x [rows, in], copied to the device so the caller's Batch may go away
  Buffer labels_;  // y [rows] int64, on the device
  std::vector<Buffer> pre_;   // pre_[i]: layer i's output before GELU [rows, out_i]
  std::vector<Buffer> post_;  // post_[i]: GELU(pre_[i]) [rows, out_i] (empty for the last layer)
  Buffer grad_pre_;           // d loss / d pre_[i] of the layer being run backward
  Buffer grad_post_;          // d loss / d post_[i]: the dx the layer above handed down
  // Where the micro-batch is, so a call out of order fails with a message instead of garbage.
  int forwarded_units_ = 0;
  bool loss_done_ = false;  // the loss is taken and backward seeded
  bool loss_read_ = false;  // loss() read it into loss_
  float loss_ = 0.0f;
  int next_backward_unit_ = -1;

  // The micro-batch's row losses summed in a device double, backward seeded: taken once.
  Buffer seeded_loss_sum(float grad_scale);
};

}  // namespace zl
