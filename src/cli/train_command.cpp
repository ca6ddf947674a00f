// train_command.cpp — `zerolab train`: runs the parsed flags (train_flags.cpp), prints a progress
// line every --steps-per-print steps, a per-rank ledger and timeline summary (train_report.cpp)
// and the what-if table, then writes the requested files (each atomically).
#include "cli/train_command.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "ckpt/checkpoint.hpp"
#include "ckpt/safetensors.hpp"
#include "cli/output_paths.hpp"
#include "cli/train_report.hpp"
#include "cli/what_if.hpp"
#include "core/atomic_file.hpp"
#include "engines/estimate.hpp"
#include "model/gpt_config.hpp"
#include "run/rank_model.hpp"
#include "run/resume_settings.hpp"
#include "trace.hpp"

namespace zl {

namespace {

// One tensor per parameter, named as the model names it and in its real shape (wte without its
// padded rows, as Hugging Face holds it), from unpadded unit vectors.
std::vector<TensorRecord> param_tensors(const std::vector<UnitLayout>& layout,
                                        const std::vector<std::vector<float>>& units) {
  std::vector<TensorRecord> tensors;
  for (std::size_t u = 0; u < layout.size(); ++u) {
    for (const auto& slot : layout[u].params) {
      const std::span<const float> values(units[u].data() + slot.offset_elems,
                                          static_cast<std::size_t>(slot.real_numel()));
      tensors.push_back(make_tensor(slot.name, slot.real_shape(), values));
    }
  }
  return tensors;
}

// --save-data: MLP x [rows, in] fp32 and labels y [rows]; GPT x [rows, T] and next tokens
// y [rows, T], both int64. Rows in the order the engines used them.
void write_used_data(const std::filesystem::path& path, const TrainConfig& config,
                     const UsedData& data) {
  if (config.model == ModelKind::Gpt) {
    const std::int64_t seq_len = config.gpt.block_size;
    const auto rows = static_cast<std::int64_t>(data.tokens.size()) / seq_len;
    write_safetensors(path, {make_tensor("x", {rows, seq_len}, data.tokens),
                             make_tensor("y", {rows, seq_len}, data.y)});
    return;
  }
  const auto rows = static_cast<std::int64_t>(data.y.size());
  write_safetensors(
      path, {make_tensor("x", {rows, config.mlp.in}, data.x), make_tensor("y", {rows}, data.y)});
}

// Six decimals; NaN as "nan" whatever its sign bit.
std::string six_decimals(double value) {
  return std::isnan(value) ? "nan" : fmt::format("{:.6f}", value);
}

// What the device line of a step prints: throughput against the device's peak.
struct DeviceRate {
  AcceleratorInfo info;  // the device's name and bf16 peak (0: unknown)
  double flops_per_token = 0.0;
  int devices = 1;  // GPUs the ranks run on: W with nccl, one for the sim
};

// The device line under a step (accelerators other than the CPU): tokens/s, MFU, step ms and
// rank 0's peak device memory per category.
void print_device_line(const StepRecord& record, const DeviceRate& rate) {
  const double tokens_per_s = static_cast<double>(record.tokens) / (record.step_ms / 1e3);
  const double peak_flops = rate.info.bf16_tflops * 1e12 * rate.devices;
  const std::string mfu =
      peak_flops > 0.0
          ? fmt::format("{:.1f}%", 100.0 * tokens_per_s * rate.flops_per_token / peak_flops)
          : std::string("n/a (peak of this device unknown)");
  std::string peaks;
  for (int c = 0; c < kMemCategoryCount; ++c) {
    const auto category = static_cast<MemCategory>(c);
    const std::int64_t peak = record.memory.peak_bytes(category);
    if (peak > 0) peaks += fmt::format(" {} {:.1f}", mem_category_name(category), peak / 1048576.0);
  }
  fmt::print("      {}: {:.0f} tokens/s  MFU {}  step {:.2f} ms  peak MiB:{}\n", rate.info.name,
             tokens_per_s, mfu, record.step_ms, peaks);
}

// The measured wall time, then the simulated timeline's step: compute, comm, exposed comm, and
// the host copies' time when the step made any (offload).
void print_step(const StepRecord& record, std::int64_t steps) {
  fmt::print(
      "step {:>5}/{}  loss {}  grad_norm {}  lr {:.6g}  {:.2f} ms  sim {:.3f} ms: compute {:.3f} "
      "comm {:.3f} exposed {:.3f}{}{}\n",
      record.step + 1, steps, six_decimals(record.loss), six_decimals(record.grad_norm), record.lr,
      record.step_ms, record.sim_step_ms, record.compute_ms, record.comm_ms, record.exposed_comm_ms,
      record.copy_ms > 0.0 ? fmt::format(" copy {:.3f}", record.copy_ms) : "",
      record.skipped ? "  skipped: gradient norm not finite" : "");
  std::fflush(stdout);
}

std::int64_t skipped_steps(const TrainResult& result) {
  return std::ranges::count_if(result.steps, [](const StepRecord& r) { return r.skipped; });
}

// The run the flags ask for; with --resume, the settings the flags left out are the
// checkpoint's (each one taken, or kept by --resume-override, is printed).
TrainConfig settled_config(const TrainArgs& args) {
  TrainConfig config = launch_config(args);
  if (args.checkpoints.resume.empty()) return config;
  // A checkpoint that cannot be read is a bad input; a flag that contradicts it, a bad request.
  const std::filesystem::path from =
      with_error_kind(ErrorKind::Input, [&] { return resume_step_dir(args.checkpoints); });
  if (const auto skipped = skipped_latest(args.checkpoints, from)) {
    fmt::print(stderr, "zerolab: resume: {}\n", *skipped);
  }
  const Manifest manifest = with_error_kind(ErrorKind::Input, [&] { return read_manifest(from); });
  const std::vector<std::string> taken = with_error_kind(ErrorKind::Usage, [&] {
    return settle_resume_settings(config, manifest, from.string(), args.settings_given,
                                  args.checkpoints.override_settings);
  });
  for (const std::string& line : taken) {
    fmt::print(stderr, "zerolab: resume: {}\n", line);
  }
  return config;
}

}  // namespace

CLI::App* add_train_command(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand(
      "train", "Train a model with an engine on the sim backend (threads) or the mpi backend");
  auto args = std::make_shared<TrainArgs>();  // kept alive by the callback, which cmd owns
  add_train_flags(*cmd, *args);
  cmd->callback([&run, args] {
    if (args->strict && !args->config_warnings.empty()) {
      std::string lines;
      for (const auto& warning : args->config_warnings) {
        lines += fmt::format("{}{}; --strict refuses it", lines.empty() ? "" : "\n", warning);
      }
      fail("{}", lines);
    }
    for (const auto& warning : args->config_warnings) {
      fmt::print(stderr, "zerolab: warning: {}\n", warning);
    }
    finish_train_args(*args);
    if (args->ds_config) {
      for (const auto& line :
           auto_resolutions(*args->ds_config, args->config, args->outputs.steps_per_print)) {
        fmt::print(stderr, "zerolab: note: {}\n", line);
      }
    }
    run = [args] {
      // The output paths before --resume's settings, which print what they take: a refused path
      // is the one line the run prints.
      with_error_kind(ErrorKind::Usage,
                      [&] { check_output_paths(args->outputs, args->checkpoints); });
      return run_train(settled_config(*args), args->outputs, args->checkpoints);
    };
  });
  return cmd;
}

namespace {

// What the command asks for, checked before anything runs: the settings (the output paths were
// checked before --resume settled them: add_train_command).
void check_request(const TrainConfig& config_in, const TrainOutputs& outputs) {
  validate(config_in);
  ZL_CHECK(outputs.steps_per_print >= 1, "--steps-per-print {} is invalid: use 1 or more steps",
           outputs.steps_per_print);
  ZL_CHECK(outputs.what_if_world >= 0, "--what-if-world {} is invalid: use 1 or more ranks",
           outputs.what_if_world);
  ZL_CHECK(outputs.what_if_world == 0 || config_in.engine != EngineKind::Reference,
           "--what-if-world needs a distributed engine (--stage 0-3): the reference makes no "
           "collective calls");
}

// --save-init and --save-final.
void write_param_files(const TrainConfig& config, const TrainOutputs& outputs,
                       const TrainResult& result) {
  if (!outputs.save_init.empty()) {
    write_safetensors(outputs.save_init, param_tensors(result.layout, initial_params(config)),
                      model_metadata(config));
  }
  if (!outputs.save_final.empty()) {
    write_safetensors(outputs.save_final, param_tensors(result.layout, result.final_state.params),
                      model_metadata(config));
  }
}

// A finished run resumed (killed after its last save): it trained nothing, so only the
// parameter files are written; the per-step outputs have no steps to hold and are refused.
int end_finished_run(const TrainConfig& config, const TrainOutputs& outputs,
                     const CheckpointPlan& checkpoints, const TrainResult& result) {
  const std::string at = fmt::format("{} is at step {}, where --steps {} ends",
                                     checkpoints.resume.string(), config.steps, config.steps);
  const std::pair<bool, std::string_view> per_step[] = {
      {!outputs.metrics.empty(), "--metrics"},
      {!outputs.summary.empty(), "--summary"},
      {!outputs.trace.empty(), "--trace"},
      {outputs.what_if_world > 0, "--what-if-world"},
      {!outputs.save_data.empty(), "--save-data"}};
  with_error_kind(ErrorKind::Usage, [&] {
    for (const auto& [asked, flag] : per_step) {
      ZL_CHECK(!asked, "{} has no steps to report: {}; give --steps more than {}, or leave {} out",
               flag, at, config.steps, flag);
    }
  });
  fmt::print("no steps to run: {}\n", at);
  write_param_files(config, outputs, result);
  return 0;
}

}  // namespace

int run_train(const TrainConfig& config_in, const TrainOutputs& outputs,
              const CheckpointPlan& checkpoints) {
  with_error_kind(ErrorKind::Usage, [&] { check_request(config_in, outputs); });
  for (const std::string& warning :
       with_error_kind(ErrorKind::Input, [&] { return init_warnings(config_in); })) {
    fmt::print(stderr, "zerolab: warning: {}\n", warning);
  }
  TrainConfig config = config_in;
  config.record_data = !outputs.save_data.empty();
  config.record_timeline =
      config.record_timeline || !outputs.trace.empty() || outputs.what_if_world > 0;

  std::optional<DeviceRate> rate;
  if (config.accelerator != Accelerator::Cpu) {
    rate = DeviceRate{.info = accelerator_info(config.accelerator, 0),
                      .flops_per_token = train_flops_per_token(config),
                      .devices = config.backend == Backend::Nccl ? config.world : 1};
  }
  const TrainResult result = train(
      config,
      [&](const StepRecord& record) {
        const bool printed_step =
            (record.step + 1) % outputs.steps_per_print == 0 || record.step + 1 == config.steps;
        if (outputs.quiet || !printed_step) return;
        print_step(record, config.steps);
        if (rate) print_device_line(record, *rate);
      },
      {}, checkpoints, output_files(outputs));
  if (!result.has_results) return 0;  // an mpi rank other than 0: rank 0's process reports
  if (result.steps.empty()) return end_finished_run(config, outputs, checkpoints, result);
  print_summary(config, result);
  print_timeline(config, result);
  std::optional<WhatIf> what_if;
  if (outputs.what_if_world > 0) {
    what_if = predict_world(config, result, outputs.what_if_world);
    fmt::print("{}", format_what_if(*what_if));
  }
  fmt::print("loss {} -> {}\n", six_decimals(result.steps.front().loss),
             six_decimals(result.steps.back().loss));
  if (const std::int64_t skipped = skipped_steps(result); skipped > 0) {
    // fp16 skips an overflowed step by itself (dynamic loss scaling); otherwise --skip-nonfinite
    // asked for it.
    const bool fp16 = config.features.precision == DType::F16;
    fmt::print("skipped {} of {} steps: {}\n", skipped, result.steps.size(),
               fp16 ? "fp16 gradients overflowed, dynamic loss scaling lowered the scale"
                    : "gradient norm not finite (--skip-nonfinite)");
  }

  if (!outputs.metrics.empty())
    write_file_atomically(outputs.metrics, metrics_lines(config, result));
  if (!outputs.summary.empty()) {
    nlohmann::json summary = summary_json(config, result);
    if (what_if) summary["what_if"] = what_if_json(*what_if);
    write_file_atomically(outputs.summary, summary.dump(2) + "\n");
  }
  if (!outputs.trace.empty()) {
    write_chrome_trace(outputs.trace, result.timelines,
                       {.engine = engine_label(config),
                        .world = config.world,
                        .link = config.link.name,
                        .gpus_per_node = config.gpus_per_node,
                        .link_across = config.link_across.name,
                        .nics_per_node = config.nics_per_node,
                        .host_link = config.host_link.name,
                        .device = std::string(device_name(config)),
                        .compute_scale = result.compute_scale});
  }
  write_param_files(config, outputs, result);
  if (!outputs.save_data.empty()) write_used_data(outputs.save_data, config, result.data);
  return 0;
}

}  // namespace zl
