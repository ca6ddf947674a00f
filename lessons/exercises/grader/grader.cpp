// grader.cpp — one configuration graded: run the reference, zerolab's engine and the learner's,
// then compare steps, states, traffic and model-state memory, in that order, and say the first
// thing that differs as a learner would want to read it.
#include "grader/grader.hpp"

#include <fmt/format.h>

#include <cmath>
#include <memory>
#include <string_view>
#include <tuple>

#include "core/error.hpp"
#include "engines/sharding.hpp"
#include "exercise.hpp"
#include "grader/grading_comm.hpp"
#include "grader/parameter_views.hpp"
#include "run/compare.hpp"

namespace zl::exercise {

namespace {

// An engine that owns the GradingComm it was built on and the RecordingModel it computes with
// (both outlive the engine). After the run, full_state() also runs a probe step, so the
// parameters every rank holds after the last step are recorded too; the run's ledgers and step
// records are taken before it.
class GradedEngine final : public Engine {
 public:
  GradedEngine(std::unique_ptr<GradingComm> comm, ParameterViews& views,
               const ParameterViews* expected, const EngineFactory& factory, EngineKind kind,
               Model& model, Device& device, const EngineOptions& options)
      : comm_(std::move(comm)),
        views_(views),
        model_(model, device, views, comm_->rank(), expected),
        engine_(factory(kind, model_, device, *comm_, options)) {}
  StepStats step(std::int64_t step) override {
    model_.at_step(step);
    next_step_ = step + 1;
    const StepStats stats = engine_->step(step);
    views_.record_norm(comm_->rank(), step, stats.grad_norm);
    return stats;
  }
  ModelState full_state() override {
    ModelState state = engine_->full_state();
    model_.at_step(next_step_);
    engine_->step(next_step_);
    return state;
  }
  ShardState shard_state() override { return engine_->shard_state(); }
  void load_shard_state(const ShardState& state) override { engine_->load_shard_state(state); }

 private:
  std::unique_ptr<GradingComm> comm_;
  ParameterViews& views_;
  RecordingModel model_;
  std::unique_ptr<Engine> engine_;
  std::int64_t next_step_ = 0;
};

// `factory`'s engines, graded, with every rank's parameter views recorded into `views` and,
// with `expected`, each visit's gathered bytes held to the reference's as it runs.
EngineFactory graded(EngineFactory factory, ParameterViews& views,
                     const ParameterViews* expected = nullptr) {
  return [factory = std::move(factory), &views, expected](
             EngineKind kind, Model& model, Device& device, Comm& comm,
             const EngineOptions& options) -> std::unique_ptr<Engine> {
    return std::make_unique<GradedEngine>(std::make_unique<GradingComm>(comm), views, expected,
                                          factory, kind, model, device, options);
  };
}

// Where to look when the first difference is in `what` of a step whose every parameter view
// was the reference's.
std::string_view hint_for_step(std::string_view what) {
  if (what == "loss") {
    return "every rank computed with the reference's parameters, so look at which batch each "
           "micro-batch reads and at how the loss is averaged over micro-batches and ranks";
  }
  if (what == "gradient norm") {
    return "the averaged gradients differ: look at the gradient reduction (which collective, "
           "which shard, avg) and at accumulation over micro-batches";
  }
  return "the step's update decision differs: look at the gradients the norm was made from";
}

// Where to look when step `s`'s gradient norm is `got` where the reference's is `want`, every
// rank having computed with the reference's parameters and agreeing on the norm. After step 1
// the reduction has already been right once, so something carried over from the step before;
// in step 1, a ratio near world / k is an average over k ranks instead of the world.
std::string norm_hint(double got, double want, std::size_t s, int world) {
  if (s > 0) {
    return fmt::format(
        "Step {}'s parameters, loss and gradient norm were all right, so step {}'s gradients "
        "carry something over from the step before: a gradient or accumulation buffer not "
        "zeroed (or not overwritten) when a step begins",
        s, s + 1);
  }
  const double ratio = got / want;
  for (int ranks = 1; ranks <= 2 * world; ++ranks) {
    const double expected = static_cast<double>(world) / static_cast<double>(ranks);
    if (ranks == world || std::abs(ratio / expected - 1.0) > 1e-2) continue;
    return fmt::format(
        "The norm is {:.4g}x the reference's, as if the gradients were averaged over {} "
        "rank(s) instead of {}: {}",
        ratio, ranks, world,
        ranks == 1 ? "they were summed, not averaged (ReduceOp::Avg divides by the world)"
                   : "look at what the reduction divides by");
  }
  return std::string(hint_for_step("gradient norm"));
}

// The first record of step `s` (0-based) that differs from the reference's.
std::optional<std::string> step_difference(const TrainResult& got, const TrainResult& want,
                                           std::size_t s, int world) {
  if (s >= got.steps.size() || s >= want.steps.size()) return std::nullopt;
  const StepRecord& g = got.steps[s];
  const StepRecord& w = want.steps[s];
  if (!same_bits(g.loss, w.loss)) {
    return fmt::format("step {}: the loss is {:.9g}, the reference's {:.9g}. {}", s + 1, g.loss,
                       w.loss, hint_for_step("loss"));
  }
  if (!same_bits(g.grad_norm, w.grad_norm)) {
    return fmt::format("step {}: the gradient norm is {:.17g}, the reference's {:.17g}. {}", s + 1,
                       g.grad_norm, w.grad_norm, norm_hint(g.grad_norm, w.grad_norm, s, world));
  }
  if (!same_bits(g.lr, w.lr) || g.skipped != w.skipped) {
    return fmt::format("step {}: lr {} skipped {}, the reference's lr {} skipped {}. {}", s + 1,
                       g.lr, g.skipped, w.lr, w.skipped, hint_for_step("update"));
  }
  return std::nullopt;
}

// Every rank must report the same gradient norm, made from every rank's shard: the first step
// where two ranks disagree.
std::optional<std::string> norm_disagreement(const ParameterViews& views, std::size_t s) {
  const std::vector<double>& first = views.norms_of(0);
  if (s >= first.size()) return std::nullopt;
  for (int rank = 1; rank < views.world(); ++rank) {
    const std::vector<double>& norms = views.norms_of(rank);
    if (s >= norms.size() || same_bits(norms[s], first[s])) continue;
    return fmt::format(
        "step {}: rank 0's gradient norm is {:.17g} and rank {}'s {:.17g}: each rank made the norm "
        "from its own shard alone. The norm, and the clipping it decides, needs the sum of "
        "squares over every rank's shard, the same on every rank (sharded_grad_norm gathers "
        "every rank's sums of its shard)",
        s + 1, first[s], rank, norms[s]);
  }
  return std::nullopt;
}

// Step by step, the first parameter view or step record that differs, then the views after the
// last step.
// What goes wrong after an update whose norm was clipped: the last of the first `steps` steps
// that clipped, with its numbers (empty when none did).
std::string clipping_note(const TrainResult& reference, const TrainConfig& config,
                          std::size_t steps) {
  const double clip = config.features.grad_clip;
  for (std::size_t s = std::min(steps, reference.steps.size()); clip > 0.0 && s-- > 0;) {
    const StepRecord& step = reference.steps[s];
    if (step.skipped || step.grad_norm <= clip) continue;
    return fmt::format(
        ". Step {}'s norm, {:.9g}, was above the clipping threshold {}: the update scales the "
        "gradients by min(1, {} / (norm + 1e-6)) of the whole model's norm",
        s + 1, step.grad_norm, clip, clip);
  }
  return "";
}

std::optional<std::string> first_run_difference(const TrainResult& got,
                                                const ParameterViews& got_views,
                                                const TrainResult& reference,
                                                const ParameterViews& reference_views,
                                                const TrainConfig& config) {
  for (std::int64_t s = 0; s <= config.steps; ++s) {
    if (auto diff =
            first_view_difference(got_views, reference_views, reference.layout, s, config.steps)) {
      if (s > 0) *diff += clipping_note(reference, config, static_cast<std::size_t>(s));
      return diff;
    }
    const auto step = static_cast<std::size_t>(s);
    if (auto diff = norm_disagreement(got_views, step)) return diff;
    if (auto diff = step_difference(got, reference, step, got_views.world())) return diff;
  }
  return std::nullopt;
}

std::optional<std::string> first_state_difference(std::string_view what,
                                                  const std::vector<std::vector<float>>& got,
                                                  const std::vector<std::vector<float>>& want,
                                                  const std::vector<UnitLayout>& layout,
                                                  int world) {
  for (std::size_t u = 0; u < want.size(); ++u) {
    if (u >= got.size() || got[u].size() != want[u].size()) {
      return fmt::format(
          "{} of unit {} should hold {} elements (unpadded) but the engine's full "
          "state has {}: look at full_state()",
          what, u, want[u].size(), u < got.size() ? got[u].size() : 0);
    }
    for (std::size_t i = 0; i < want[u].size(); ++i) {
      if (same_bits(got[u][i], want[u][i])) continue;
      const auto owner = static_cast<int>(static_cast<std::int64_t>(i) / layout[u].shard_elems);
      const ShardRange shard = shard_of(layout[u], owner, world);
      return fmt::format(
          "after the last step, {} of unit {} ({}) element {} is {:.9g}, the reference's {:.9g}; "
          "the element is in rank {}'s shard [{}, {}). {}",
          what, u, layout[u].name, i, got[u][i], want[u][i], owner, shard.begin, shard.end,
          what == "the parameters"
              ? "Every rank computes with the reference's parameters, so look at full_state(): "
                "which shard each rank hands over"
              : "Every rank computes with the reference's parameters and every step's gradient "
                "norm was right: look at the optimizer step of the own shard (its moments "
                "belong to the rank that owns the element)");
    }
  }
  return std::nullopt;
}

// What zerolab's engine of each stage sends, for the learner's comparison.
std::string_view traffic_rule(EngineKind kind) {
  switch (kind) {
    case EngineKind::Ddp:
      return "DDP all-reduces the gradients, 2Ψ(N-1)/N a micro-batch";
    case EngineKind::Zero1:
    case EngineKind::Zero2:
      return "ZeRO-1 and -2 reduce-scatter the gradients (Ψ(N-1)/N a micro-batch) and "
             "all-gather the parameters once a step (Ψ(N-1)/N), the same 2Ψ(N-1)/N as DDP";
    default:
      return "ZeRO-3 all-gathers each unit for forward and again for backward (2Ψ(N-1)/N) and "
             "reduce-scatters its gradient (Ψ(N-1)/N), 3Ψ(N-1)/N a micro-batch";
  }
}

// Bytes rank `rank` sends over a run to all-gather the gradient norm's tree sums (a few fp64 per
// unit, every step): what a norm from the own shard alone leaves out.
std::int64_t norm_sums_bytes(const TrainConfig& config, const std::vector<UnitLayout>& layout,
                             int rank) {
  const std::int64_t sums = norm_sums_per_rank(layout, config.world) * config.world;
  return config.steps *
         ring_volume(CollectiveKind::AllGather, sums, sizeof(double), rank, config.world)
             .sent_bytes;
}

std::optional<std::string> first_traffic_difference(const TrainResult& got, const TrainResult& want,
                                                    const TrainConfig& config) {
  for (std::size_t r = 0; r < want.ranks.size(); ++r) {
    for (int k = 0; k < kCollectiveKindCount; ++k) {
      const auto collective = static_cast<CollectiveKind>(k);
      const std::int64_t got_bytes = got.ranks[r].traffic.sent_bytes(collective);
      const std::int64_t want_bytes = want.ranks[r].traffic.sent_bytes(collective);
      if (got_bytes == want_bytes) continue;
      const std::string said = fmt::format(
          "the parameters are right, but rank {} sent {} bytes by {} where {} sends {}", r,
          got_bytes, collective_name(collective), engine_name(config.engine), want_bytes);
      if (collective == CollectiveKind::AllGather && config.engine != EngineKind::Ddp &&
          want_bytes - got_bytes == norm_sums_bytes(config, want.layout, static_cast<int>(r))) {
        return said +
               ": the bytes missing are the gradient norm's sums (a few fp64 per unit "
               "and shard, each summing " +
               std::to_string(kNormBlockElems) +
               "-element blocks), which every rank gathers from every other. A "
               "norm made from the own shard alone gives each rank its own norm and its own "
               "clipping; sharded_grad_norm makes the same norm, from every shard, everywhere";
      }
      return said + ": " + std::string(traffic_rule(config.engine));
    }
  }
  return std::nullopt;
}

std::optional<std::string> first_memory_difference(const TrainResult& got, const TrainResult& want,
                                                   EngineKind kind) {
  constexpr MemCategory kModelStates[] = {MemCategory::Params, MemCategory::Grads,
                                          MemCategory::Master, MemCategory::Optimizer};
  for (std::size_t r = 0; r < want.ranks.size(); ++r) {
    for (const MemCategory category : kModelStates) {
      const std::int64_t got_bytes = got.ranks[r].memory.current_bytes(category);
      const std::int64_t want_bytes = want.ranks[r].memory.current_bytes(category);
      if (got_bytes == want_bytes) continue;
      return fmt::format(
          "the parameters and the traffic are right, but after the last step rank "
          "{} holds {} bytes of {} where {} holds {}: the stage keeps that state "
          "{}",
          r, got_bytes, mem_category_name(category), engine_name(kind), want_bytes,
          want_bytes < got_bytes ? "sharded (or not at all)" : "whole");
    }
  }
  return std::nullopt;
}

}  // namespace

std::string describe(const TrainConfig& c) {
  const TrainingFeatures& f = c.features;
  return fmt::format(
      "{} at world {}: MLP layers {} width {} in {} classes {}, {} step(s) of micro-batch {}, "
      "{}, accumulation {}, clipping {}, lr {} ({}), seed {}",
      engine_name(c.engine), c.world, c.mlp.layers, c.mlp.width, c.mlp.in, c.mlp.classes, c.steps,
      c.micro_batch, dtype_name(f.precision), f.grad_accum_steps, f.grad_clip, c.adamw.lr,
      lr_schedule_name(c.lr_schedule.kind), c.seed);
}

std::optional<Failure> grade(const TrainConfig& config, const EngineFactory& learner) {
  TrainConfig run = config;
  run.engine = EngineKind::Reference;
  const TrainResult reference = train(run);
  run.engine = config.engine;
  // zerolab's engine of the stage is bitwise the reference (the properties prove it): its
  // parameter views, traffic and memory are the reference's for this world.
  ParameterViews zerolab_views(config.world);
  run.engine_factory = graded(make_engine, zerolab_views);
  const TrainResult zerolab = train(run);
  ParameterViews got_views(config.world);
  run.engine_factory = graded(learner, got_views, &zerolab_views);
  TrainResult got;
  try {
    got = train(run);
  } catch (const Error& e) {
    const std::string_view what = e.what();
    return Failure{.todo = what.find("is not written yet") != std::string_view::npos,
                   .message = fmt::format("the run failed: {}", what)};
  }
  if (auto diff = first_run_difference(got, got_views, reference, zerolab_views, config)) {
    return Failure{.message = *diff};
  }
  const ModelState& g = got.final_state;
  const ModelState& w = reference.final_state;
  for (const auto& [what, got_values, want_values] :
       {std::tuple{"the parameters", &g.params, &w.params},
        std::tuple{"Adam's exp_avg", &g.exp_avg, &w.exp_avg},
        std::tuple{"Adam's exp_avg_sq", &g.exp_avg_sq, &w.exp_avg_sq}}) {
    if (auto diff =
            first_state_difference(what, *got_values, *want_values, got.layout, config.world)) {
      return Failure{.message = *diff + clipping_note(reference, config, reference.steps.size())};
    }
  }
  if (auto diff = first_traffic_difference(got, zerolab, config)) {
    return Failure{.message = *diff};
  }
  if (auto diff = first_memory_difference(got, zerolab, config.engine)) {
    return Failure{.message = *diff};
  }
  return std::nullopt;
}

}  // namespace zl::exercise
