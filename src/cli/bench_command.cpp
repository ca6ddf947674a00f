// bench_command.cpp — `zerolab bench`: parses each benchmark's flags, runs it (src/bench/) and
// prints a table, or one JSON object with --json. Every number printed is measured in this run.
#include "cli/bench_command.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "bench/adam_bench.hpp"
#include "bench/adam_bench_cuda.hpp"
#include "bench/timing.hpp"
#include "bench/torch_adamw.hpp"
#include "cli/bench_collectives_command.hpp"
#include "core/error.hpp"

#ifndef ZL_SOURCE_DIR
#define ZL_SOURCE_DIR "."
#endif

namespace zl {

namespace {

using nlohmann::ordered_json;

// ---- adam -----------------------------------------------------------------------------------

struct AdamFlags {
  std::string accelerator = "cpu";
  std::string params = "50000000";
  bool params_given = false;  // cuda: otherwise the 124M preset's parameters
  bench::AdamBenchOptions options;
  std::string torch_script;  // empty: the accelerator's script
  std::string python;
  bool no_torch = false;
  bool json = false;
};

// "50000000" or "5e7": a whole, positive parameter count.
std::int64_t parse_count(const std::string& text, const std::string& flag) {
  std::int64_t whole = 0;
  const char* last = text.data() + text.size();
  if (const auto [end, error] = std::from_chars(text.data(), last, whole);
      end == last && error == std::errc() && whole > 0) {
    return whole;
  }
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), last, value);
  ZL_CHECK(error == std::errc() && end == last && value >= 1 && value <= 0x1p53 &&
               value == std::floor(value),
           "{} '{}' is invalid: give a positive whole count like 50000000 or 5e7", flag, text);
  return static_cast<std::int64_t>(value);
}

// --torch-script, or the repository's `default_name` under scripts/.
std::string torch_script(const AdamFlags& flags, const char* default_name) {
  if (!flags.torch_script.empty()) return flags.torch_script;
  return std::string(ZL_SOURCE_DIR) + "/scripts/" + default_name;
}

int run_adam(const AdamFlags& flags) {
  const bench::AdamBenchResult result = bench::run_adam_bench(flags.options);
  bench::TorchAdamResult torch;
  if (flags.no_torch) {
    torch.note = "no PyTorch comparison: --no-torch";
  } else {
    torch = bench::run_torch_adamw(torch_script(flags, "bench_torch_adamw.py"), flags.python, result.params_elems, result.threads,
                                   result.repeats);
  }
  // The faster of PyTorch's two CPU paths is the one to beat.
  const double torch_ms = torch.ran ? std::min(torch.single_tensor_ms, torch.foreach_ms) : 0.0;
  const double speedup_vs_torch = torch.ran && result.ms > 0.0 ? torch_ms / result.ms : 0.0;
  const double triad_fraction = result.triad_gbps > 0.0 ? result.gbps / result.triad_gbps : 0.0;
  if (flags.json) {
    ordered_json out = {{"accelerator", "cpu"},
                        {"params", result.params_elems},
                        {"threads", result.threads},
                        {"repeats", result.repeats},
                        {"ms", result.ms},
                        {"gbps", result.gbps},
                        {"triad_gbps", result.triad_gbps},
                        {"triad_fraction", triad_fraction},
                        {"reference_ms", result.reference_ms}};
    if (torch.ran) {
      out["torch"] = {{"version", torch.version},
                      {"python", torch.python},
                      {"single_tensor_ms", torch.single_tensor_ms},
                      {"foreach_ms", torch.foreach_ms},
                      {"speedup", speedup_vs_torch}};
    } else {
      out["torch"] = nullptr;
      out["torch_note"] = torch.note;
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print("AdamW on {} fp32 parameters, {} thread{}, median of {} updates\n",
             result.params_elems, result.threads, result.threads == 1 ? "" : "s", result.repeats);
  fmt::print("  {:<44} {:>9.2f} ms  {:>7.2f} GB/s at 28 B/param  ({:.0f}% of triad)\n",
             "adamw_update_fused", result.ms, result.gbps, 100.0 * triad_fraction);
  if (result.reference_ms > 0.0) {
    fmt::print("  {:<44} {:>9.2f} ms  {:>7.2f} GB/s  (fused is {:.2f}x faster)\n",
               "adamw_update (reference, 1 thread)", result.reference_ms,
               bench::gbps(bench::kAdamBytesPerParam * static_cast<double>(result.params_elems),
                           result.reference_ms),
               result.reference_ms / result.ms);
  }
  fmt::print("  {:<44} {:>12} {:>7.2f} GB/s at 24 B/elem, same threads, same run\n",
             "STREAM triad a = b + s*c (fp64)", "", result.triad_gbps);
  if (!torch.ran) {
    fmt::print("  {}\n", torch.note);
    return 0;
  }
  fmt::print("  {:<44} {:>9.2f} ms  (fused is {:.2f}x faster)\n",
             fmt::format("torch {} AdamW(foreach=False)", torch.version), torch.single_tensor_ms,
             torch.single_tensor_ms / result.ms);
  fmt::print("  {:<44} {:>9.2f} ms  (fused is {:.2f}x faster)\n",
             fmt::format("torch {} AdamW(foreach=True)", torch.version), torch.foreach_ms,
             torch.foreach_ms / result.ms);
  return 0;
}

// --accelerator cuda: the multi-tensor kernel against the GPU's copy bandwidth and, when Python
// can import torch with CUDA, torch.optim.AdamW(fused=True) on the same tensors.
int run_adam_cuda(const AdamFlags& flags) {
  bench::AdamCudaBenchOptions options;
  options.params_elems = flags.params_given ? flags.options.params_elems : 0;
  options.repeats = flags.options.repeats;
  const bench::AdamCudaBenchResult result = bench::run_adam_bench_cuda(options);
  bench::TorchCudaAdamResult torch;
  if (flags.no_torch) {
    torch.note = "no PyTorch comparison: --no-torch";
  } else {
    torch = bench::run_torch_adamw_cuda(torch_script(flags, "torch_adamw_bench.py"), flags.python, result.tensor_elems, result.warmup,
                                        result.repeats);
  }
  const double copy_fraction = result.copy_gbps > 0.0 ? result.gbps / result.copy_gbps : 0.0;
  const double speedup_vs_torch = torch.ran && result.ms > 0.0 ? torch.ms / result.ms : 0.0;
  if (flags.json) {
    ordered_json out = {{"accelerator", "cuda"},         {"device", result.device},
                        {"params", result.params_elems}, {"tensors", result.tensor_elems.size()},
                        {"split", "gpt2-124M"},          {"warmup", result.warmup},
                        {"repeats", result.repeats},     {"ms", result.ms},
                        {"best_ms", result.best_ms},     {"gbps", result.gbps},
                        {"best_gbps", result.best_gbps}, {"copy_bytes", result.copy_bytes},
                        {"copy_ms", result.copy_ms},     {"copy_gbps", result.copy_gbps},
                        {"copy_fraction", copy_fraction}};
    if (torch.ran) {
      out["torch"] = {{"version", torch.version},
                      {"python", torch.python},
                      {"fused", true},
                      {"ms", torch.ms},
                      {"best_ms", torch.best_ms},
                      {"gbps", torch.gbps},
                      {"copy_gbps", torch.copy_gbps},
                      {"copy_fraction", torch.copy_gbps > 0.0 ? torch.gbps / torch.copy_gbps : 0.0},
                      {"speedup", speedup_vs_torch}};
    } else {
      out["torch"] = nullptr;
      out["torch_note"] = torch.note;
    }
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print(
      "AdamW on {} fp32 parameters in {} tensors (GPT-2 124M's sizes), {}, CUDA events, median "
      "and best of {} updates after {} untimed\n",
      result.params_elems, result.tensor_elems.size(), result.device, result.repeats,
      result.warmup);
  fmt::print(
      "  {:<44} {:>9.3f} ms  {:>8.1f} GB/s at 28 B/param  ({:.0f}% of copy; best {:.3f} ms)\n",
      "adamw_update_cuda (multi-tensor)", result.ms, result.gbps, 100.0 * copy_fraction,
      result.best_ms);
  fmt::print("  {:<44} {:>9.3f} ms  {:>8.1f} GB/s read + write, same run\n",
             fmt::format("cudaMemcpyAsync D2D, {} bytes", result.copy_bytes), result.copy_ms,
             result.copy_gbps);
  if (!torch.ran) {
    fmt::print("  {}\n", torch.note);
    return 0;
  }
  fmt::print("  {:<44} {:>9.3f} ms  {:>8.1f} GB/s at 28 B/param  (zerolab is {:.2f}x faster)\n",
             fmt::format("torch {} AdamW(fused=True)", torch.version), torch.ms, torch.gbps,
             speedup_vs_torch);
  return 0;
}

CLI::App* add_adam(CLI::App& bench, std::function<int()>& run) {
  auto* cmd = bench.add_subcommand(
      "adam",
      "Fused AdamW: ms per update, GB/s at 28 B/param, against the STREAM triad and "
      "torch.optim.AdamW with the same threads (cpu), or against the GPU's copy bandwidth and "
      "torch's fused CUDA AdamW (cuda)");
  auto flags = std::make_shared<AdamFlags>();
  flags->options.threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  cmd->add_option("--accelerator", flags->accelerator,
                  "cpu: the fused CPU kernel | cuda: the multi-tensor kernel on GPU 0, built "
                  "with CUDA only")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  auto* params = cmd->add_option("--params", flags->params,
                                 "fp32 parameters: 50000000 or 5e7 (cuda: default 124439808, the "
                                 "124M preset's, in its tensors' sizes)")
                     ->capture_default_str();
  auto* threads = cmd->add_option("--threads", flags->options.threads,
                                  "Threads for the kernel, triad and torch (cpu only)")
                      ->check(CLI::Range(1, 1024))
                      ->capture_default_str();
  cmd->add_option("--repeats", flags->options.repeats, "Timed updates (the median is reported)")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  auto* reference_repeats =
      cmd->add_option(
             "--reference-repeats", flags->options.reference_repeats,
             "Timed updates of the scalar reference kernel on one thread (0: skip; cpu only)")
          ->check(CLI::Range(0, 100000))
          ->capture_default_str();
  cmd->add_option("--torch-script", flags->torch_script,
                  "The PyTorch benchmark script (default: scripts/bench_torch_adamw.py for cpu, "
                  "scripts/torch_adamw_bench.py for cuda)");
  cmd->add_option("--python", flags->python,
                  "Interpreter for the script (default: python3, else /usr/bin/python3, the first "
                  "that imports torch)");
  cmd->add_flag("--no-torch", flags->no_torch, "Skip the PyTorch comparison");
  cmd->add_flag("--json", flags->json,
                "Print {accelerator, params, threads, repeats, ms, gbps, triad_gbps, "
                "triad_fraction, reference_ms, torch: {version, python, single_tensor_ms, "
                "foreach_ms, speedup} or null with torch_note}; cuda: {accelerator, device, "
                "params, tensors, split, warmup, repeats, ms, best_ms, gbps, best_gbps, "
                "copy_bytes, copy_ms, copy_gbps, copy_fraction, torch: {version, python, fused, "
                "ms, best_ms, gbps, copy_gbps, copy_fraction, speedup} or null with torch_note}");
  cmd->callback([&run, flags, params, threads, reference_repeats] {
    flags->options.params_elems = parse_count(flags->params, "--params");
    flags->params_given = params->count() > 0;
    if (flags->accelerator == "cuda") {
      ZL_CHECK(threads->count() == 0 && reference_repeats->count() == 0,
               "--threads and --reference-repeats are for --accelerator cpu: the GPU benchmark "
               "has no threads and no reference run");
      run = [flags] { return run_adam_cuda(*flags); };
      return;
    }
    run = [flags] { return run_adam(*flags); };
  });
  return cmd;
}

// "4K" -> 4 << 10: the multiplier of a size suffix, 0 when unknown.
std::size_t suffix_multiplier(std::string suffix) {
  std::transform(suffix.begin(), suffix.end(), suffix.begin(),
                 [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  if (suffix.empty() || suffix == "B") return 1;
  if (suffix == "K" || suffix == "KIB") return std::size_t{1} << 10;
  if (suffix == "M" || suffix == "MIB") return std::size_t{1} << 20;
  if (suffix == "G" || suffix == "GIB") return std::size_t{1} << 30;
  return 0;
}

}  // namespace

std::size_t parse_size_bytes(const std::string& text, const std::string& flag) {
  std::size_t number = 0;
  const char* last = text.data() + text.size();
  const auto [end, error] = std::from_chars(text.data(), last, number);
  const std::size_t multiplier =
      error == std::errc() ? suffix_multiplier(std::string(end, last)) : 0;
  ZL_CHECK(multiplier > 0 && number > 0 &&
               number <= std::numeric_limits<std::size_t>::max() / multiplier,
           "{} '{}' is invalid: give a size like 4096, 4K, 64M or 1G", flag, text);
  return number * multiplier;
}

std::vector<int> parse_worlds(const std::string& text, const std::string& flag) {
  const auto bad = [&] {
    fail("{} '{}' is invalid: give a range like 2..8, a list like 2,4,8 or one world size", flag,
         text);
  };
  const auto parse_world = [&](std::string_view part) {
    int world = 0;
    const auto [end, error] = std::from_chars(part.data(), part.data() + part.size(), world);
    if (part.empty() || error != std::errc() || end != part.data() + part.size() || world < 1) {
      bad();
    }
    return world;
  };
  std::vector<int> worlds;
  if (const std::size_t dots = text.find(".."); dots != std::string::npos) {
    const int first = parse_world(std::string_view(text).substr(0, dots));
    const int last = parse_world(std::string_view(text).substr(dots + 2));
    if (last < first) bad();
    for (int world = first; world <= last; ++world) worlds.push_back(world);
    return worlds;
  }
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = text.find(',', begin);
    worlds.push_back(parse_world(std::string_view(text).substr(begin, comma - begin)));
    if (comma == std::string::npos) break;
    begin = comma + 1;
  }
  return worlds;
}

CLI::App* add_bench_command(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand(
      "bench",
      "Speed: the fused AdamW kernel, the sim's collectives, step time per ZeRO stage, a disk "
      "for NVMe offload");
  cmd->require_subcommand(1);
  add_adam(*cmd, run);
  add_bench_collectives(*cmd, run);
  add_bench_step(*cmd, run);
  add_bench_nvme(*cmd, run);
  return cmd;
}

}  // namespace zl
