// step_bench.cpp — trains the same config at stages 0..3 and compares their median step times.
#include "bench/step_bench.hpp"

#include "bench/timing.hpp"
#include "core/error.hpp"
#include "model/gpt_config.hpp"

namespace zl::bench {

TrainConfig step_bench_config(const StepBenchOptions& options, int stage) {
  TrainConfig config;
  config.model = options.model;
  if (options.model == ModelKind::Gpt) config.gpt = gpt_preset(options.preset);
  config.engine = engine_of_stage(stage);
  config.world = options.world;
  config.steps = options.steps;
  config.micro_batch = options.micro_batch;
  validate(config);
  return config;
}

StepBenchResult run_step_bench(const StepBenchOptions& options) {
  ZL_CHECK(options.rounds >= 1, "--rounds {} is invalid: give 1 or more", options.rounds);
  StepBenchResult result;
  result.model = std::string(model_name(options.model));
  result.preset = options.model == ModelKind::Gpt ? options.preset : "";
  result.world = options.world;
  result.steps = options.steps;
  result.rounds = options.rounds;
  std::vector<std::vector<double>> samples_ms(4);  // per stage
  for (int round = 0; round < options.rounds; ++round) {
    for (int stage = 0; stage <= 3; ++stage) {
      const TrainResult run = train(step_bench_config(options, stage));
      for (const StepRecord& record : run.steps) {
        if (record.step > 0 || run.steps.size() == 1) samples_ms[stage].push_back(record.step_ms);
      }
      if (round == 0 && stage == 0) {
        for (const auto& unit : run.final_state.params) {
          result.params_elems += static_cast<std::int64_t>(unit.size());
        }
      }
    }
  }
  for (int stage = 0; stage <= 3; ++stage) {
    const double ms = median_ms(samples_ms[static_cast<std::size_t>(stage)]);
    result.rows.push_back({.stage = stage,
                           .engine = std::string(engine_name(engine_of_stage(stage))),
                           .ms = ms,
                           .overhead_vs_ddp = 0.0});
  }
  for (StepRow& row : result.rows) {
    row.overhead_vs_ddp = result.rows.front().ms > 0.0 ? row.ms / result.rows.front().ms : 0.0;
  }
  return result;
}

}  // namespace zl::bench
