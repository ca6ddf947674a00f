// grader.cpp — one configuration graded: run the reference, zerolab's engine and the learner's,
// then compare steps, states, traffic and model-state memory, in that order, and say the first
// thing that differs as a learner would want to read it.
#include "grader/grader.hpp"

#include <fmt/format.h>

#include <memory>
#include <string_view>
#include <tuple>

#include "core/error.hpp"
#include "exercise.hpp"
#include "grader/grading_comm.hpp"
#include "run/compare.hpp"

namespace zl::exercise {

namespace {

// An engine that owns the GradingComm it was built on (the comm outlives the engine).
class GradedEngine final : public Engine {
 public:
  GradedEngine(std::unique_ptr<GradingComm> comm, const EngineFactory& factory, EngineKind kind,
               Model& model, Device& device, const EngineOptions& options)
      : comm_(std::move(comm)), engine_(factory(kind, model, device, *comm_, options)) {}
  StepStats step(std::int64_t step) override { return engine_->step(step); }
  ModelState full_state() override { return engine_->full_state(); }
  ShardState shard_state() override { return engine_->shard_state(); }
  void load_shard_state(const ShardState& state) override { engine_->load_shard_state(state); }

 private:
  std::unique_ptr<GradingComm> comm_;
  std::unique_ptr<Engine> engine_;
};

EngineFactory graded(EngineFactory factory) {
  return [factory = std::move(factory)](EngineKind kind, Model& model, Device& device, Comm& comm,
                                        const EngineOptions& options) -> std::unique_ptr<Engine> {
    return std::make_unique<GradedEngine>(std::make_unique<GradingComm>(comm), factory, kind, model,
                                          device, options);
  };
}

// Where to look when the first difference is in `what` of step `step` (0-based).
std::string hint_for_step(std::string_view what, std::int64_t step) {
  if (what == "loss") {
    return step == 0 ? "the forward pass ran on other parameters than the reference's: look at "
                       "how the parameters are initialised, held or gathered"
                     : fmt::format(
                           "the forward pass of step {} ran on other parameters: the "
                           "update or the parameter all_gather of step {} went wrong",
                           step + 1, step);
  }
  if (what == "gradient norm") {
    return "the averaged gradients differ: look at the gradient reduction (which collective, "
           "which shard, avg) and at accumulation over micro-batches";
  }
  return "the step's update decision differs: look at the gradients the norm was made from";
}

std::optional<std::string> first_step_difference(const TrainResult& got, const TrainResult& want) {
  for (std::size_t s = 0; s < want.steps.size() && s < got.steps.size(); ++s) {
    const StepRecord& g = got.steps[s];
    const StepRecord& w = want.steps[s];
    const auto step = static_cast<std::int64_t>(s);
    if (!same_bits(g.loss, w.loss)) {
      return fmt::format("step {}: the loss is {:.9g}, the reference's {:.9g}. {}", s + 1, g.loss,
                         w.loss, hint_for_step("loss", step));
    }
    if (!same_bits(g.grad_norm, w.grad_norm)) {
      return fmt::format("step {}: the gradient norm is {:.17g}, the reference's {:.17g}. {}",
                         s + 1, g.grad_norm, w.grad_norm, hint_for_step("gradient norm", step));
    }
    if (!same_bits(g.lr, w.lr) || g.skipped != w.skipped) {
      return fmt::format("step {}: lr {} skipped {}, the reference's lr {} skipped {}. {}", s + 1,
                         g.lr, g.skipped, w.lr, w.skipped, hint_for_step("update", step));
    }
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
          "the element is in rank {}'s shard [{}, {}). Every step's loss and gradient norm were "
          "right, so the gradients were: look at the update of the own shard and at the "
          "all_gather that makes every rank whole again (which elements each rank sends, and "
          "where they land)",
          what, u, layout[u].name, i, got[u][i], want[u][i], owner, shard.begin, shard.end);
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

std::optional<std::string> first_traffic_difference(const TrainResult& got, const TrainResult& want,
                                                    EngineKind kind) {
  for (std::size_t r = 0; r < want.ranks.size(); ++r) {
    for (int k = 0; k < kCollectiveKindCount; ++k) {
      const auto collective = static_cast<CollectiveKind>(k);
      const std::int64_t got_bytes = got.ranks[r].traffic.sent_bytes(collective);
      const std::int64_t want_bytes = want.ranks[r].traffic.sent_bytes(collective);
      if (got_bytes == want_bytes) continue;
      return fmt::format(
          "the parameters are right, but rank {} sent {} bytes by {} where {} "
          "sends {}: {}",
          r, got_bytes, collective_name(collective), engine_name(kind), want_bytes,
          traffic_rule(kind));
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
  run.engine_factory = graded(learner);
  TrainResult got;
  try {
    got = train(run);
  } catch (const Error& e) {
    const std::string_view what = e.what();
    return Failure{.todo = what.find("is not written yet") != std::string_view::npos,
                   .message = fmt::format("the run failed: {}", what)};
  }
  if (auto diff = first_step_difference(got, reference)) return Failure{.message = *diff};
  const ModelState& g = got.final_state;
  const ModelState& w = reference.final_state;
  for (const auto& [what, got_values, want_values] :
       {std::tuple{"the parameters", &g.params, &w.params},
        std::tuple{"Adam's exp_avg", &g.exp_avg, &w.exp_avg},
        std::tuple{"Adam's exp_avg_sq", &g.exp_avg_sq, &w.exp_avg_sq}}) {
    if (auto diff =
            first_state_difference(what, *got_values, *want_values, got.layout, config.world)) {
      return Failure{.message = *diff};
    }
  }
  run.engine_factory = graded(make_engine);
  const TrainResult zerolab = train(run);
  if (auto diff = first_traffic_difference(got, zerolab, config.engine)) {
    return Failure{.message = *diff};
  }
  if (auto diff = first_memory_difference(got, zerolab, config.engine)) {
    return Failure{.message = *diff};
  }
  return std::nullopt;
}

}  // namespace zl::exercise
