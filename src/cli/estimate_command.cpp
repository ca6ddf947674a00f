// estimate_command.cpp — `zerolab estimate`: read Ψ from --params or a model shape, compute the
// four stages with engines/estimate.hpp, and print a table in decimal GB (or JSON in bytes).
#include "cli/estimate_command.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "engines/estimate.hpp"

namespace zl {

namespace {

constexpr std::int64_t kBytesPerGb = 1'000'000'000;

// "7000000000" or "7e9": an integer, or a double that is whole and small enough to be exact.
std::int64_t parse_param_count(const std::string& text) {
  const char* first = text.data();
  const char* last = first + text.size();
  std::int64_t whole = 0;
  if (const auto [end, error] = std::from_chars(first, last, whole); end == last) {
    ZL_CHECK(error == std::errc(), "--params {} does not fit in int64: give at most {}", text,
             std::numeric_limits<std::int64_t>::max());
    return whole;
  }
  double value = 0;
  const auto [end, error] = std::from_chars(first, last, value);
  ZL_CHECK(error == std::errc() && end == last && std::isfinite(value),
           "--params '{}' is not a number: give a count like 7000000000 or 7e9", text);
  ZL_CHECK(value == std::floor(value), "--params {} is not a whole number of parameters", text);
  ZL_CHECK(std::fabs(value) <= 0x1p53,
           "--params {} is past 2^53, where a double is not exact: write it as an integer", text);
  return static_cast<std::int64_t>(value);
}

std::string stage_name(int stage) {
  return stage == 0 ? "0 (DDP)" : std::to_string(stage);
}

// Exact decimal GB of integer bytes, without trailing zeros: 112, 38.5, 26.25, 0.000092288.
std::string gb(std::int64_t bytes) {
  std::string text = fmt::format("{}.{:09}", bytes / kBytesPerGb, bytes % kBytesPerGb);
  text.erase(text.find_last_not_of('0') + 1);
  if (text.back() == '.') text.pop_back();
  return text;
}

std::string optimizer_note(const EstimateFlags& flags, StateDtype dtype) {
  if (flags.optimizer_bytes_given) return "set by --optimizer-bytes";
  return dtype == StateDtype::Mixed ? "fp32 master, momentum, variance" : "momentum, variance";
}

void print_table(const EstimateFlags& flags, const EstimateConfig& config,
                 const std::vector<StageEstimate>& stages) {
  const std::string source =
      flags.model.empty()
          ? std::string()
          : fmt::format(" (mlp: layers {}, in {}, width {}, classes {})", flags.mlp.layers,
                        flags.mlp.in, flags.mlp.width, flags.mlp.classes);
  fmt::print("model states per GPU for Ψ = {} parameters{} on N = {} GPUs\n", config.params, source,
             config.world);
  fmt::print("dtype {}: params {} B, grads {} B, optimizer K = {} B per parameter ({})\n",
             dtype_name(config.dtype), param_bytes_per_param(config.dtype),
             grad_bytes_per_param(config.dtype), config.optimizer_bytes_per_param,
             optimizer_note(flags, config.dtype));
  fmt::print(
      "1 GB = 1e9 bytes; a sharded term (/N) is one rank's shard of ceil(Ψ/N) = {} elements\n\n",
      shard_elems(config.params, config.world));
  fmt::print("{:<8} {:>12} {:>12} {:>13} {:>12} {:>16}  {}\n", "stage", "params_GB", "grads_GB",
             "optimizer_GB", "total_GB", "total_bytes", "formula");
  for (const auto& stage : stages) {
    fmt::print("{:<8} {:>12} {:>12} {:>13} {:>12} {:>16}  {}\n", stage_name(stage.stage),
               gb(stage.params_bytes), gb(stage.grads_bytes), gb(stage.optimizer_bytes),
               gb(stage.total_bytes()), stage.total_bytes(), stage.formula);
  }
}

void print_json(const EstimateConfig& config, const std::vector<StageEstimate>& stages) {
  nlohmann::ordered_json out = {
      {"params", config.params},
      {"world", config.world},
      {"dtype", dtype_name(config.dtype)},
      {"param_bytes_per_param", param_bytes_per_param(config.dtype)},
      {"grad_bytes_per_param", grad_bytes_per_param(config.dtype)},
      {"optimizer_bytes_per_param", config.optimizer_bytes_per_param},
      {"shard_elems", shard_elems(config.params, config.world)},
      {"stages", nlohmann::ordered_json::array()},
  };
  for (const auto& stage : stages) {
    out["stages"].push_back({{"stage", stage.stage},
                             {"name", stage_name(stage.stage)},
                             {"params_bytes", stage.params_bytes},
                             {"grads_bytes", stage.grads_bytes},
                             {"optimizer_bytes", stage.optimizer_bytes},
                             {"total_bytes", stage.total_bytes()},
                             {"formula", stage.formula}});
  }
  fmt::print("{}\n", out.dump(2));
}

}  // namespace

CLI::App* add_estimate_command(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand(
      "estimate",
      "Per-GPU model-state memory (params + grads + optimizer) of DDP and ZeRO stages 1, 2, 3");
  auto flags = std::make_shared<EstimateFlags>();
  cmd->add_option("--params", flags->params, "Ψ, parameters of the model: 7000000000 or 7e9");
  auto* model = cmd->add_option("--model", flags->model, "Count Ψ from a model instead: mlp");
  cmd->add_option("--layers", flags->mlp.layers, "Linear layers of the MLP")
      ->needs(model)
      ->capture_default_str();
  cmd->add_option("--width", flags->mlp.width, "Hidden width of the MLP")
      ->needs(model)
      ->capture_default_str();
  cmd->add_option("--in", flags->mlp.in, "Input features of the MLP")
      ->needs(model)
      ->capture_default_str();
  cmd->add_option("--classes", flags->mlp.classes, "Output classes of the MLP")
      ->needs(model)
      ->capture_default_str();
  cmd->add_option("--world", flags->world, "N, data-parallel GPUs")->required();
  cmd->add_option("--dtype", flags->dtype, "mixed (2Ψ + 2Ψ + 12Ψ) or fp32 (4Ψ + 4Ψ + 8Ψ)")
      ->capture_default_str();
  auto* optimizer =
      cmd->add_option("--optimizer-bytes", flags->optimizer_bytes,
                      "K, optimizer state bytes per parameter (default 12 mixed, 8 fp32)");
  cmd->add_flag(
      "--json", flags->json,
      "Print one JSON object: params, world, dtype, param_bytes_per_param, "
      "grad_bytes_per_param, optimizer_bytes_per_param, shard_elems, and \"stages\", an "
      "array of {stage, name, params_bytes, grads_bytes, optimizer_bytes, total_bytes, formula}");
  cmd->callback([&run, flags, optimizer] {
    flags->optimizer_bytes_given = optimizer->count() > 0;
    run = [flags] { return run_estimate(*flags); };
  });
  return cmd;
}

int run_estimate(const EstimateFlags& flags) {
  ZL_CHECK(
      flags.params.empty() != flags.model.empty(),
      "give exactly one of --params N or --model mlp (with --layers, --width, --in, --classes)");
  EstimateConfig config;
  if (!flags.params.empty()) {
    config.params = parse_param_count(flags.params);
  } else {
    ZL_CHECK(flags.model == "mlp",
             "--model {} is not supported by estimate: use --model mlp or --params N", flags.model);
    config.params = mlp_param_count(flags.mlp);
  }
  config.world = flags.world;
  config.dtype = parse_state_dtype(flags.dtype);
  config.optimizer_bytes_per_param = flags.optimizer_bytes_given
                                         ? flags.optimizer_bytes
                                         : default_optimizer_bytes_per_param(config.dtype);
  const auto stages = estimate_stages(config);
  if (flags.json) {
    print_json(config, stages);
  } else {
    print_table(flags, config, stages);
  }
  return 0;
}

}  // namespace zl
