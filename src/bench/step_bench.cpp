// step_bench.cpp — trains the same config at stages 0..3 and compares their median step times,
// and each with the GEMM rate one thread of this machine reaches.
#include "bench/step_bench.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <thread>
#include <vector>

#include "bench/timing.hpp"
#include "core/error.hpp"
#include "model/gpt_config.hpp"
#include "ops/cpu/cpu_gemm.hpp"
#include "ops/cpu/cpu_thread_pool.hpp"

namespace zl::bench {

TrainConfig step_bench_config(const StepBenchOptions& options, int stage) {
  TrainConfig config;
  config.model = options.model;
  if (options.model == ModelKind::Gpt) config.gpt = options.gpt;
  config.engine = engine_of_stage(stage);
  config.world = options.world;
  config.threads = options.threads;
  config.steps = options.steps;
  config.micro_batch = options.micro_batch;
  config.accelerator = options.accelerator;
  config.features.precision = options.precision;
  validate(config);
  return config;
}

double single_thread_gemm_gflops(std::int64_t n) {
  const auto elems = static_cast<std::size_t>(n * n);
  std::vector<float> a(elems, 0.5f), b(elems, 0.25f), c(elems);
  const cpu::GemmProblem problem{.a = {a.data(), n, false},
                                 .b = {b.data(), n, false},
                                 .c = c.data(),
                                 .c_stride_elems = n,
                                 .m = n,
                                 .n = n,
                                 .k = n};
  cpu::gemm_single_tile(problem);  // warm-up: page faults, Eigen's block buffers
  double best_ms = 0.0;
  for (int round = 0; round < 3; ++round) {
    const double start_ms = steady_ms();
    cpu::gemm_single_tile(problem);
    const double ms = steady_ms() - start_ms;
    best_ms = round == 0 ? ms : std::min(best_ms, ms);
  }
  const double flops =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  return best_ms > 0.0 ? flops / (best_ms * 1e6) : 0.0;
}

StepBenchResult run_step_bench(const StepBenchOptions& options) {
  ZL_CHECK(options.rounds >= 1, "--rounds {} is invalid: give 1 or more", options.rounds);
  constexpr std::int64_t kGemmElems = 1024;
  StepBenchResult result;
  result.model = std::string(model_name(options.model));
  const GptConfig& gpt = options.gpt;
  result.preset = options.model == ModelKind::Gpt
                      ? fmt::format("{} (L{} H{} C{} T{} V{})", options.preset, gpt.n_layer,
                                    gpt.n_head, gpt.n_embd, gpt.block_size, gpt.vocab)
                      : "";
  result.world = options.world;
  result.steps = options.steps;
  result.rounds = options.rounds;
  result.cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  result.threads = run_threads(step_bench_config(options, 0));
  result.step_gflop = train_flops_per_step(step_bench_config(options, 0)) / 1e9;
  result.gemm_isa = std::string(cpu::gemm_isa());
  result.gemm_gflops = single_thread_gemm_gflops(kGemmElems);
  std::vector<std::vector<double>> samples_ms(4);  // per stage
  std::vector<std::int64_t> host_waits(4, 0);      // per stage, the most of a timed step
  for (int round = 0; round < options.rounds; ++round) {
    for (int stage = 0; stage <= 3; ++stage) {
      const TrainResult run = train(step_bench_config(options, stage));
      for (const StepRecord& record : run.steps) {
        if (record.step == 0 && run.steps.size() > 1) continue;  // the warm-up
        samples_ms[stage].push_back(record.step_ms);
        host_waits[stage] = std::max(host_waits[stage], record.host_waits);
      }
      // The model's parameters (wte's padded rows left out), as the FLOPs count them.
      if (round == 0 && stage == 0) result.params_elems = total_real_numel(run.layout);
    }
  }
  for (int stage = 0; stage <= 3; ++stage) {
    const double ms = median_ms(samples_ms[static_cast<std::size_t>(stage)]);
    result.rows.push_back({.stage = stage,
                           .engine = std::string(engine_name(engine_of_stage(stage))),
                           .ms = ms,
                           .overhead_vs_ddp = 0.0,
                           .gflops = ms > 0.0 ? result.step_gflop / (ms / 1e3) : 0.0,
                           .host_waits = host_waits[static_cast<std::size_t>(stage)]});
  }
  for (StepRow& row : result.rows) {
    row.overhead_vs_ddp = result.rows.front().ms > 0.0 ? row.ms / result.rows.front().ms : 0.0;
  }
  return result;
}

}  // namespace zl::bench
