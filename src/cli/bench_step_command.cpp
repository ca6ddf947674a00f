// bench_step_command.cpp — `zerolab bench step`: the flags of bench/step_bench.hpp's run, and its
// table or JSON.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "bench/step_bench.hpp"
#include "cli/bench_command.hpp"
#include "cli/train_flag_groups.hpp"
#include "model/gpt_config.hpp"

namespace zl {

namespace {

using nlohmann::ordered_json;

struct StepFlags {
  std::string model = "gpt";
  GptOverrides gpt_sizes;
  bench::StepBenchOptions options;
  bool json = false;
};

int run_step(const StepFlags& flags) {
  const bench::StepBenchResult result = bench::run_step_bench(flags.options);
  if (flags.json) {
    ordered_json rows = ordered_json::array();
    for (const auto& row : result.rows) {
      rows.push_back({{"stage", row.stage},
                      {"engine", row.engine},
                      {"ms", row.ms},
                      {"overhead_vs_ddp", row.overhead_vs_ddp},
                      {"gflops", row.gflops},
                      {"of_gemm", row.gflops / result.gemm_gflops},
                      {"host_waits", row.host_waits}});
    }
    const ordered_json out = {{"model", result.model},
                              {"preset", result.preset},
                              {"params", result.params_elems},
                              {"world", result.world},
                              {"threads", result.threads},
                              {"cores", result.cores},
                              {"steps", result.steps},
                              {"rounds", result.rounds},
                              {"step_gflop", result.step_gflop},
                              {"gemm_isa", result.gemm_isa},
                              {"gemm_gflops", result.gemm_gflops},
                              {"rows", rows}};
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print(
      "{}{} ({} params, {:.3g} GFLOP a step), world {}, {} threads per rank on {} cores, {} steps "
      "per stage x {} rounds, median step ms on rank 0\n",
      result.model, result.preset.empty() ? "" : " " + result.preset, result.params_elems,
      result.step_gflop, result.world, result.threads, result.cores, result.steps, result.rounds);
  fmt::print("single-thread GEMM (1024^3, {}): {:.1f} GFLOP/s\n", result.gemm_isa,
             result.gemm_gflops);
  fmt::print("{:<6} {:<7} {:>10} {:>16} {:>9} {:>8} {:>11}\n", "stage", "engine", "step_ms",
             "overhead_vs_ddp", "GFLOP/s", "of_gemm", "host_waits");
  for (const auto& row : result.rows) {
    fmt::print("{:<6} {:<7} {:>10.3f} {:>15.2f}x {:>9.1f} {:>7.0f}% {:>11}\n", row.stage,
               row.engine, row.ms, row.overhead_vs_ddp, row.gflops,
               100.0 * row.gflops / result.gemm_gflops, row.host_waits);
  }
  return 0;
}

}  // namespace

CLI::App* add_bench_step(CLI::App& bench, std::function<int()>& run) {
  auto* cmd = bench.add_subcommand(
      "step",
      "Median step time of the same training run at ZeRO stages 0..3 on the sim, and "
      "each stage's overhead over DDP");
  auto flags = std::make_shared<StepFlags>();
  cmd->add_option("--model", flags->model, "mlp or gpt")
      ->check(CLI::IsMember({"mlp", "gpt"}))
      ->capture_default_str();
  cmd->add_option("--preset", flags->options.preset,
                  fmt::format("GPT preset: {}", fmt::join(gpt_preset_names(), ", ")))
      ->capture_default_str();
  add_gpt_size_flags(*cmd, flags->gpt_sizes);
  cmd->add_option("--world", flags->options.world, "Simulated ranks")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  add_threads_flag(*cmd, flags->options.threads);
  cmd->add_option("--steps", flags->options.steps, "Steps per stage; the first is not timed")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000000}))
      ->capture_default_str();
  cmd->add_option("--rounds", flags->options.rounds,
                  "Times the four stages are trained in turn (medians over all rounds)")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--micro-batch", flags->options.micro_batch, "Rows per rank per step")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000000}))
      ->capture_default_str();
  cmd->add_flag("--json", flags->json,
                "Print {model, preset, params, world, threads, cores, steps, rounds, step_gflop, "
                "gemm_isa, gemm_gflops, rows: [{stage, engine, ms, overhead_vs_ddp, gflops, "
                "of_gemm, host_waits}]}");
  add_accelerator_flag(*cmd, flags->options.accelerator)->default_str("cpu");
  cmd->add_flag_callback(
      "--bf16", [flags] { flags->options.precision = DType::BF16; },
      "Train in bf16 (parameters and gradients; an fp32 master and Adam state), as --bf16 does");
  cmd->callback([&run, flags] {
    flags->options.model = flags->model == "gpt" ? ModelKind::Gpt : ModelKind::Mlp;
    if (flags->options.threads == 0) flags->options.threads = threads_from_env();
    flags->options.gpt = gpt_preset(flags->options.preset);
    apply_gpt_sizes(flags->gpt_sizes, flags->options.gpt);
    const GptOverrides& sizes = flags->gpt_sizes;
    if (sizes.n_layer || sizes.n_head || sizes.n_embd || sizes.block_size || sizes.vocab) {
      flags->options.preset += " with sizes given";
    }
    bench::step_bench_config(flags->options, 0);  // a bad preset or size exits 2 here
    run = [flags] { return run_step(*flags); };
  });
  return cmd;
}

}  // namespace zl
