// parameter_views.cpp — recording each rank's parameter views and finding the first one that
// differs from the reference's.
#include "grader/parameter_views.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/host_convert.hpp"
#include "run/compare.hpp"

namespace zl::exercise {

namespace {

// The visits of `step` among `visits`, in order.
std::vector<const ParameterVisit*> visits_of_step(const std::vector<ParameterVisit>& visits,
                                                  std::int64_t step) {
  std::vector<const ParameterVisit*> out;
  for (const ParameterVisit& visit : visits) {
    if (visit.step == step) out.push_back(&visit);
  }
  return out;
}

// Where to look when visit `visit` is the first with other parameters than the reference's.
std::string hint_for(const ParameterVisit& visit, bool forward_was_right) {
  if (visit.backward && forward_was_right) {
    return "the forward visit of this unit had the right parameters and the backward visit did "
           "not: look at what the unit is gathered into for backward, and whether that buffer "
           "was released, reused or changed in between";
  }
  if (visit.step == 0) {
    return "no update has run yet: look at how the parameters are initialised, held or gathered";
  }
  return fmt::format(
      "Every earlier step's parameters were right, so the update or the parameter all_gather of "
      "step {} went wrong: look at the update of the own shard and at the all_gather that makes "
      "every rank whole again (which elements each rank sends, and where they land)",
      visit.step);
}

}  // namespace

void ParameterViews::record(int rank, ParameterVisit visit) {
  ZL_CHECK(rank >= 0 && rank < world(), "rank {} of a world of {}", rank, world());
  visits_[static_cast<std::size_t>(rank)].push_back(std::move(visit));
}

const std::vector<ParameterVisit>& ParameterViews::of_rank(int rank) const {
  ZL_CHECK(rank >= 0 && rank < world(), "rank {} of a world of {}", rank, world());
  return visits_[static_cast<std::size_t>(rank)];
}

void ParameterViews::record_norm(int rank, std::int64_t step, double grad_norm) {
  ZL_CHECK(rank >= 0 && rank < world(), "rank {} of a world of {}", rank, world());
  std::vector<double>& norms = norms_[static_cast<std::size_t>(rank)];
  ZL_CHECK(step == static_cast<std::int64_t>(norms.size()), "rank {} reports step {} after {}",
           rank, step, norms.size());
  norms.push_back(grad_norm);
}

const std::vector<double>& ParameterViews::norms_of(int rank) const {
  ZL_CHECK(rank >= 0 && rank < world(), "rank {} of a world of {}", rank, world());
  return norms_[static_cast<std::size_t>(rank)];
}

std::vector<float> RecordingModel::host_fp32(TensorIn params) {
  // The graded ranks run on CPU devices: their memory is the host's.
  std::vector<float> values(static_cast<std::size_t>(params.elems));
  convert_on_host(params.data, params.dtype, values.data(), DType::F32, params.elems);
  return values;
}

void RecordingModel::at_step(std::int64_t step) {
  step_ = step;
  micro_batches_ = 0;
}

void RecordingModel::begin(const Batch& batch) {
  ++micro_batches_;
  inner_.begin(batch);
}

void RecordingModel::forward_unit(int unit, TensorIn params) {
  check_gathered(unit, /*backward=*/false);
  record(unit, /*backward=*/false, params);
  inner_.forward_unit(unit, params);
}

void RecordingModel::backward_unit(int unit, TensorIn params, std::span<float> grads) {
  check_gathered(unit, /*backward=*/true);
  record(unit, /*backward=*/true, params);
  inner_.backward_unit(unit, params, grads);
}

void RecordingModel::check_gathered(int unit, bool backward) const {
  if (expected_ == nullptr) return;
  const std::vector<ParameterVisit>& expected = expected_->of_rank(rank_);
  if (visits_ >= expected.size()) return;
  const ParameterVisit& want = expected[visits_];
  const std::int64_t held = device_.ledger().current_bytes(MemCategory::Gathered);
  if (want.unit != unit || want.backward != backward || held == want.gathered_bytes) return;
  fail(
      "the {} visit of unit {} in step {}, micro-batch {}, held {} bytes of gathered "
      "parameters where the reference holds {}: {}",
      backward ? "backward" : "forward", unit, step_ + 1, micro_batches_, held, want.gathered_bytes,
      held < want.gathered_bytes
          ? "the unit's gathered buffer was released before the visit used it (it would "
            "compute with freed memory). Keep the gathered buffer in UnitParams::owned, which "
            "lives until the visit ends"
          : "a unit gathered earlier was not released after its visit (or this one was "
            "gathered twice)");
}

void RecordingModel::record(int unit, bool backward, TensorIn params) {
  ++visits_;
  views_.record(rank_, {.step = step_,
                        .micro_batch = micro_batches_ - 1,
                        .unit = unit,
                        .backward = backward,
                        .params = host_fp32(params),
                        .gathered_bytes = device_.ledger().current_bytes(MemCategory::Gathered)});
}

std::optional<std::string> first_view_difference(const ParameterViews& got,
                                                 const ParameterViews& want,
                                                 const std::vector<UnitLayout>& layout,
                                                 std::int64_t step, std::int64_t steps) {
  const bool probe = step == steps;
  const std::string when =
      probe ? fmt::format("after step {}, the last,", step) : fmt::format("in step {}", step + 1);
  for (int rank = 0; rank < want.world(); ++rank) {
    const auto got_visits = visits_of_step(got.of_rank(rank), step);
    const auto want_visits = visits_of_step(want.of_rank(rank), step);
    if (got_visits.size() != want_visits.size()) {
      return fmt::format(
          "{} rank {} ran {} forward and backward visits of units where the reference runs {}: "
          "look at how each micro-batch is run (one run_micro_batch each)",
          when, rank, got_visits.size(), want_visits.size());
    }
    std::vector<bool> forward_right(layout.size(), false);
    for (std::size_t v = 0; v < want_visits.size(); ++v) {
      const ParameterVisit& g = *got_visits[v];
      const ParameterVisit& w = *want_visits[v];
      const auto unit = static_cast<std::size_t>(w.unit);
      if (g.unit != w.unit || g.backward != w.backward || g.params.size() != w.params.size()) {
        return fmt::format(
            "{} rank {}'s visit {} was to unit {} ({} elements) where the reference visits unit "
            "{} ({} elements): look at how each micro-batch is run (one run_micro_batch each)",
            when, rank, v + 1, g.unit, g.params.size(), w.unit, w.params.size());
      }
      std::optional<std::size_t> differs;
      for (std::size_t i = 0; i < w.params.size() && !differs; ++i) {
        if (!same_bits(g.params[i], w.params[i])) differs = i;
      }
      if (!differs) {
        if (!w.backward) forward_right[unit] = true;
        continue;
      }
      const std::size_t i = *differs;
      const int world = want.world();
      const auto owner = static_cast<int>(static_cast<std::int64_t>(i) / layout[unit].shard_elems);
      const ShardRange shard = shard_of(layout[unit], owner, world);
      const std::string visit =
          probe ? fmt::format("rank {} holds, for its next forward,", rank)
                : fmt::format("rank {}'s {} visit of micro-batch {} computed with", rank,
                              w.backward ? "backward" : "forward", w.micro_batch + 1);
      return fmt::format(
          "{} {} the parameters of unit {} ({}) whose element {} is {:.9g}, the reference's "
          "{:.9g}; the element is in rank {}'s shard [{}, {}). {}",
          when, visit, w.unit, layout[unit].name, i, g.params[i], w.params[i], owner, shard.begin,
          shard.end, hint_for(w, forward_right[unit]));
    }
  }
  return std::nullopt;
}

}  // namespace zl::exercise
