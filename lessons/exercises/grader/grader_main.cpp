// grader_main.cpp — `exercise_grader`: grades the exercise engines this binary was built with
// (lessons/exercises/*.cpp, or with --engines zerolab zerolab's own) by the properties that grade
// zerolab's engines: for random MLPs, worlds of 1-8 ranks, 1-3 steps, fp32/bf16/fp16,
// accumulation, clipping and schedules, each stage must be bitwise the unsharded reference and
// send and hold what its closed forms say. A failure is shrunk to the smallest configuration
// RapidCheck finds and told in the learner's terms. Exit 0: every stage graded passed.
#include <fmt/format.h>
#include <rapidcheck.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <ostream>
#include <string>
#include <vector>

#include "exercise.hpp"
#include "grader/grader.hpp"

namespace zl::exercise {

// One graded run, shown in a counterexample as the learner would set it up.
struct TrainingRun {
  TrainConfig config;
};

std::ostream& operator<<(std::ostream& os, const TrainingRun& run) {
  return os << describe(run.config);
}

}  // namespace zl::exercise

namespace {

using zl::EngineKind;
using zl::TrainConfig;
using zl::exercise::TrainingRun;

// A small configuration of stage `kind`, within what the exercises train with. Small values
// come first, so a failure shrinks to the smallest world, model and run that shows it.
rc::Gen<TrainingRun> gen_run(EngineKind kind, const std::vector<zl::DType>& precisions) {
  return rc::gen::exec([kind, precisions] {
    TrainConfig config;
    config.engine = kind;
    config.world = *rc::gen::inRange(1, 9);
    config.steps = *rc::gen::inRange(1, 4);
    config.micro_batch = *rc::gen::inRange(1, 5);
    config.mlp = {.layers = *rc::gen::inRange(1, 4),
                  .width = *rc::gen::inRange(1, 25),
                  .in = *rc::gen::inRange(1, 9),
                  .classes = *rc::gen::inRange(1, 6)};
    config.adamw.lr = *rc::gen::element(1e-3, 3e-2);
    config.seed = *rc::gen::inRange(0u, 1000u);
    config.features.precision = *rc::gen::elementOf(precisions);
    config.features.grad_accum_steps = *rc::gen::inRange(1, 4);
    config.features.grad_clip = *rc::gen::element(0.0, 0.01);
    config.lr_schedule = *rc::gen::element(
        zl::LrSchedule{},
        zl::LrSchedule{.kind = zl::LrScheduleKind::Linear, .warmup_steps = 1, .total_steps = 3});
    config.threads = 1;
    return TrainingRun{config};
  });
}

// Grades one stage; prints one verdict (and RapidCheck's report of a counterexample).
bool grade_stage(EngineKind kind, const zl::EngineFactory& factory,
                 const std::vector<zl::DType>& precisions) {
  const std::string name(zl::engine_name(kind));
  // A part still to write fails every configuration: say so once, without shrinking.
  TrainConfig first;
  first.engine = kind;
  first.world = 2;
  first.steps = 1;
  first.micro_batch = 2;
  first.mlp = {.layers = 2, .width = 8, .in = 4, .classes = 3};
  first.threads = 1;
  if (const auto failure = zl::exercise::grade(first, factory); failure && failure->todo) {
    fmt::print("{}: NOT DONE: {}\n", name, failure->message);
    return false;
  }
  const bool passed = rc::check(fmt::format("{} is bitwise the reference", name), [&] {
    const TrainingRun run = *gen_run(kind, precisions);
    if (const auto failure = zl::exercise::grade(run.config, factory)) {
      // What RC_FAIL throws, without the file and line it would print before the message.
      throw rc::detail::CaseResult(rc::detail::CaseResult::Type::Failure, failure->message);
    }
  });
  fmt::print("{}: {}\n", name,
             passed ? "OK: bitwise the reference, with the traffic and memory of its closed forms"
                    : "FAILED: the counterexample above is the smallest one found");
  return passed;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Grades the exercise engines against the unsharded reference (lessons/exercises)"};
  std::vector<int> stages;
  std::string engines = "exercises";
  int cases = 0;
  std::string precision = "all";
  bool hint = false;
  app.add_option("--stage", stages, "stages to grade: 0 (DDP), 1, 2, 3 (default: all four)")
      ->check(CLI::Range(0, 3));
  app.add_option("--engines", engines, "exercises (this binary's) or zerolab (the library's)")
      ->check(CLI::IsMember({"exercises", "zerolab"}));
  app.add_option("--cases", cases, "random configurations per stage (default 100, or RC_PARAMS)")
      ->check(CLI::Range(1, 100000));
  app.add_option("--precision", precision,
                 "fp32, bf16 or fp16 to grade one precision only (default all three)")
      ->check(CLI::IsMember({"all", "fp32", "bf16", "fp16"}));
  app.add_flag("--hint", hint, "a part still to write also names the call that goes there");
  CLI11_PARSE(app, argc, argv);
  zl::exercise::show_hints(hint);
  std::vector<zl::DType> precisions;
  for (const zl::DType dtype : {zl::DType::F32, zl::DType::BF16, zl::DType::F16}) {
    if (precision == "all" || precision == zl::dtype_name(dtype)) precisions.push_back(dtype);
  }
  if (cases > 0) setenv("RC_PARAMS", fmt::format("max_success={}", cases).c_str(), 1);
  if (stages.empty()) stages = {0, 1, 2, 3};
  const zl::EngineFactory factory = engines == "zerolab"
                                        ? zl::EngineFactory(zl::make_engine)
                                        : zl::EngineFactory(zl::exercise::make_exercise_engine);
  bool passed = true;
  for (const int stage : stages) {
    try {
      passed = grade_stage(zl::engine_of_stage(stage), factory, precisions) && passed;
    } catch (const std::exception& e) {
      fmt::print("{}: FAILED: {}\n", zl::engine_name(zl::engine_of_stage(stage)), e.what());
      passed = false;
    }
  }
  return passed ? 0 : 1;
}
