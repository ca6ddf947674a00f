// parameter_views.hpp — what every rank computes with: a Model that passes every call on to a
// rank's own model and records the parameters of each forward and backward visit of a unit, so
// the grader can compare each rank's view of the whole unit, visit by visit, with the reference
// engine's. A step's views are the parameters after the step before; the views of one more step
// (the probe) are the parameters after the last step, on every rank, not only the own shard.
// Each visit also keeps the gathered bytes the rank held while it computed, and each step the
// gradient norm each rank reported.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engines/partition.hpp"
#include "model/model.hpp"
#include "ops/device.hpp"

namespace zl::exercise {

/// One visit of a unit by the forward or backward pass, with the parameters it computed with.
struct ParameterVisit {
  std::int64_t step = 0;  ///< 0-based; the probe step is the run's step count
  int micro_batch = 0;    ///< 0-based within the step
  int unit = 0;
  bool backward = false;
  std::vector<float> params;  ///< the unit's numel parameters, as the model received them, in fp32
  std::int64_t gathered_bytes = 0;  ///< the rank's MemCategory::Gathered bytes during the visit
};

/// Every rank's visits, in the order each rank made them.
class ParameterViews {
 public:
  /// Room for `world` ranks' visits.
  explicit ParameterViews(int world)
      : visits_(static_cast<std::size_t>(world)), norms_(static_cast<std::size_t>(world)) {}

  /// Appends a visit to `rank`'s list (each rank's thread appends only to its own).
  void record(int rank, ParameterVisit visit);

  /// Rank `rank`'s visits, in order.
  const std::vector<ParameterVisit>& of_rank(int rank) const;

  /// Keeps the gradient norm rank `rank` reported for step `step` (0-based, in order).
  void record_norm(int rank, std::int64_t step, double grad_norm);

  /// The gradient norms rank `rank` reported, step by step.
  const std::vector<double>& norms_of(int rank) const;

  /// The number of ranks.
  int world() const { return static_cast<int>(visits_.size()); }

 private:
  std::vector<std::vector<ParameterVisit>> visits_;
  std::vector<std::vector<double>> norms_;
};

/// A rank's model for a graded engine: every call goes to `inner`; forward_unit and backward_unit
/// also record their parameters, and the gathered bytes `device` holds, under the step set by
/// at_step().
class RecordingModel final : public Model {
 public:
  /// Records rank `rank`'s visits of `inner` on `device` (both must outlive it) into `views`.
  /// With `expected` (the reference engine's views of the same run), a visit that holds other
  /// gathered bytes than the expected visit at its position throws zl::Error before the model
  /// reads the parameters: fewer, the unit was released before its visit used it; more, an
  /// earlier one was never released.
  RecordingModel(Model& inner, const Device& device, ParameterViews& views, int rank,
                 const ParameterViews* expected = nullptr)
      : inner_(inner), device_(device), views_(views), rank_(rank), expected_(expected) {}

  /// The visits from now on belong to step `step` (0-based); the micro-batch count restarts.
  void at_step(std::int64_t step);

  const std::vector<UnitSpec>& units() const override { return inner_.units(); }
  std::vector<int> forward_order() const override { return inner_.forward_order(); }
  void init_unit(int unit, std::span<float> flat, std::uint64_t seed) const override {
    inner_.init_unit(unit, flat, seed);
  }
  void begin(const Batch& batch) override;
  void forward_unit(int unit, TensorIn params) override;
  float loss(float grad_scale) override { return inner_.loss(grad_scale); }
  void add_loss(float grad_scale, std::span<float> loss_sum) override {
    inner_.add_loss(grad_scale, loss_sum);
  }
  void backward_unit(int unit, TensorIn params, std::span<float> grads) override;

 private:
  // Throws when the visit about to run holds other gathered bytes than `expected_` says.
  void check_gathered(int unit, bool backward) const;
  void record(int unit, bool backward, TensorIn params);
  // The parameters a visit got, widened to fp32 on the host (exact).
  static std::vector<float> host_fp32(TensorIn params);

  Model& inner_;
  const Device& device_;
  ParameterViews& views_;
  int rank_ = 0;
  const ParameterViews* expected_ = nullptr;
  std::size_t visits_ = 0;  // recorded so far: the position of the next visit
  std::int64_t step_ = 0;
  int micro_batches_ = 0;  // begun in this step
};

/// The first visit of step `step` (0-based; `steps` itself is the probe) whose parameters differ
/// from the reference's at the same rank and position, told as a learner would read it; empty
/// when every rank computed with the reference's parameters.
std::optional<std::string> first_view_difference(const ParameterViews& got,
                                                 const ParameterViews& want,
                                                 const std::vector<UnitLayout>& layout,
                                                 std::int64_t step, std::int64_t steps);

}  // namespace zl::exercise
