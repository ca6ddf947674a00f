// estimate_command.cpp — `zerolab estimate`: read Ψ from --params or the units of a model (MLP or
// GPT-2), compute the four stages with engines/estimate.hpp in the engines' view (padding, master
// copy, accumulator, persistent units) beside the same stages on the unpadded Ψ, with --micro-batch
// the model's activations (engines/estimate_activations.hpp), and print a table in decimal GB (or
// JSON in bytes). Every check runs while parsing, so a bad flag exits 2.
#include "cli/estimate_command.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#include "cli/estimate_offload.hpp"
#include "cli/estimate_traffic_report.hpp"
#include "core/error.hpp"
#include "optim/grad_norm.hpp"

namespace zl {

namespace {

// What is estimated, and the estimate.
struct Report {
  std::string model;                  // "mlp", "gpt" or "" for a bare --params
  std::string shape;                  // "mlp: layers 3, in 16, ..." or ""
  nlohmann::ordered_json shape_json;  // the same as an object (null for --params)
  EstimateOptions options;
  bool optimizer_bytes_given = false;
  StateElems elems;
  std::vector<LedgerEstimate> stages;    // the engines' view
  std::vector<LedgerEstimate> unpadded;  // the same options on the bare Ψ
  std::int64_t micro_batch = 0;          // B; 0: no activation term
  std::int64_t seq_len = 0;              // T of the GPT (0 for the MLP)
  ActivationEstimate activations;        // one micro-batch's, when micro_batch > 0
  ActivationPolicy activation_policy;    // what the GPT's blocks keep
  std::optional<PlaceBudget> budget;     // --device-gb, --host-gb, --disk-gb
  std::vector<FitRow> fit;               // the memory wall, with a budget
  int shard_group_ranks = 0;             // G with --shard-group node: stages 1-3 shard in nodes
  TrafficReport traffic;                 // each stage's bytes sent by link level
};

// `gb` decimal GB of a budget flag as bytes: finite, above 0 and at most 1e9 GB.
std::int64_t budget_bytes(double gb, std::string_view flag) {
  ZL_CHECK(std::isfinite(gb) && gb > 0.0 && gb <= 1e9,
           "{} {} is invalid: give the GB (1e9 bytes) one GPU may use there, above 0 and at most "
           "1e9",
           flag, gb);
  return static_cast<std::int64_t>(std::llround(gb * 1e9));
}

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

DType parse_precision(const std::string& name) {
  if (name == "fp32") return DType::F32;
  if (name == "bf16") return DType::BF16;
  if (name == "fp16") return DType::F16;
  fail("--precision '{}' is not known: use fp32, bf16 or fp16", name);
}

// JSON null for "", else the string.
nlohmann::ordered_json string_or_null(const std::string& text) {
  return text.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(text);
}

// The engines' features the traffic depends on, as train would take the same flags.
TrainingFeatures traffic_features(const EstimateFlags& flags, const EstimateOptions& options) {
  ZL_CHECK(!flags.shard_group_node || flags.gpus_per_node > 0,
           "--shard-group node shards inside each node: give --gpus-per-node G too");
  TrainingFeatures features;
  features.precision = options.precision;
  features.grad_accum_steps = options.grad_accum_steps;
  features.persistence_threshold_elems = options.persistence_threshold_elems;
  features.hpz_partition_ranks = options.hpz_partition_ranks;
  features.quantized_weights = flags.quantized_weights;
  features.quantized_gradients = flags.quantized_gradients;
  features.shard_group_ranks = flags.shard_group_node ? flags.gpus_per_node : 0;
  return features;
}

Report make_report(const EstimateFlags& flags) {
  ZL_CHECK(flags.params.empty() != flags.model.empty(),
           "give exactly one of --params N or --model mlp|gpt (with the model's sizes)");
  ZL_CHECK(!flags.mlp_sizes_given || flags.model == "mlp",
           "--layers, --width, --in and --classes are MLP sizes: use them with --model mlp");
  ZL_CHECK(!flags.gpt_sizes_given || flags.model == "gpt",
           "--preset, --n-layer, --n-head, --n-embd, --block-size and --vocab are GPT sizes: use "
           "them with --model gpt");
  ZL_CHECK(!flags.persistence_threshold_given || flags.params.empty(),
           "--persistence-threshold needs the model's units: give --model mlp|gpt instead of "
           "--params");
  Report report;
  report.options = EstimateOptions{
      .precision = parse_precision(flags.precision),
      .grad_accum_steps = flags.grad_accum_steps,
      .persistence_threshold_elems = flags.persistence_threshold_elems,
      .optimizer_bytes_per_param = flags.optimizer_bytes,
      .optimizer_tier = parse_offload_tier(flags.offload_optimizer, "--offload-optimizer"),
      .param_tier = parse_offload_tier(flags.offload_param, "--offload-param"),
      .hpz_partition_ranks = flags.hpz_partition_ranks,
      .param_buffer_count = flags.param_buffer_count,
      .param_buffer_elems = flags.param_buffer_elems,
      .param_max_in_cpu_elems = flags.param_max_in_cpu_elems};
  validate(report.options);
  ZL_CHECK(flags.world % flags.hpz_partition_ranks == 0,
           "--hpz-partition-size {} does not divide --world {}: use the GPUs of a node",
           flags.hpz_partition_ranks, flags.world);
  report.optimizer_bytes_given =
      flags.optimizer_bytes != EstimateOptions{}.optimizer_bytes_per_param;
  report.model = flags.model;
  std::vector<UnitSpec> units;  // the model's, or one unit of Ψ for a bare count
  std::vector<int> forward_order;
  if (flags.model.empty()) {
    const std::int64_t params = parse_param_count(flags.params);
    report.elems = state_elems(params, flags.world);
    units = {UnitSpec{"params", {ParamSpec{"params", {params}}}}};
  } else if (flags.model == "mlp") {
    const MlpConfig& mlp = flags.mlp;
    report.shape = fmt::format("mlp: layers {}, in {}, width {}, classes {}", mlp.layers, mlp.in,
                               mlp.width, mlp.classes);
    report.shape_json = {
        {"layers", mlp.layers}, {"in", mlp.in}, {"width", mlp.width}, {"classes", mlp.classes}};
    units = checked_units(mlp);
    report.elems = state_elems(units, flags.world, report.options);
  } else {
    ZL_CHECK(flags.model == "gpt", "--model {} is not known: use mlp or gpt", flags.model);
    const GptConfig& gpt = flags.gpt;
    report.shape = fmt::format(
        "gpt{}: n_layer {}, n_head {}, n_embd {}, block_size {}, vocab {} (padded to {})",
        flags.preset.empty() ? "" : " " + flags.preset, gpt.n_layer, gpt.n_head, gpt.n_embd,
        gpt.block_size, gpt.vocab, padded_vocab(gpt));
    report.shape_json = {{"preset", string_or_null(flags.preset)},
                         {"n_layer", gpt.n_layer},
                         {"n_head", gpt.n_head},
                         {"n_embd", gpt.n_embd},
                         {"block_size", gpt.block_size},
                         {"vocab", gpt.vocab},
                         {"padded_vocab", padded_vocab(gpt)}};
    units = checked_units(gpt);
    forward_order = gpt_forward_order(gpt);
    report.elems = state_elems(units, flags.world, report.options);
  }
  if (flags.micro_batch) {
    ZL_CHECK(!flags.model.empty(),
             "--micro-batch needs the model's shapes for its activations: give --model mlp|gpt "
             "instead of --params");
    report.micro_batch = *flags.micro_batch;
    report.activation_policy = flags.activations;
    ZL_CHECK(flags.model == "gpt" || flags.activations.recompute == Recompute::None,
             "--activation-checkpointing {} recomputes GPT blocks, which the MLP has none of: "
             "drop it or use --model gpt",
             activation_policy_name(flags.activations));
    if (flags.model == "mlp") {
      report.activations = estimate_activations(flags.mlp, report.micro_batch);
    } else {
      report.seq_len = flags.gpt.block_size;
      report.activations =
          estimate_activations(flags.gpt, report.micro_batch, report.seq_len, flags.activations,
                               report.options.precision);
    }
  }
  const int budgets = (flags.device_gb ? 1 : 0) + (flags.host_gb ? 1 : 0) + (flags.disk_gb ? 1 : 0);
  ZL_CHECK(budgets == 0 || budgets == 3,
           "the memory wall needs a GPU's three budgets: give --device-gb, --host-gb and "
           "--disk-gb together");
  if (budgets == 3) {
    report.budget = PlaceBudget{.device_bytes = budget_bytes(*flags.device_gb, "--device-gb"),
                                .host_bytes = budget_bytes(*flags.host_gb, "--host-gb"),
                                .disk_bytes = budget_bytes(*flags.disk_gb, "--disk-gb")};
    report.fit = fit_rows(flags.world, report.options, *report.budget);
  }
  report.stages = estimate_ledgers(report.elems, report.options);
  report.unpadded =
      estimate_ledgers(state_elems(report.elems.params, report.elems.world), report.options);
  if (flags.shard_group_node && flags.gpus_per_node > 0 && flags.gpus_per_node < flags.world) {
    // Stages 1-3 hold a node's shards: their states are those of a world of G.
    report.shard_group_ranks = flags.gpus_per_node;
    const StateElems node = flags.model.empty()
                                ? state_elems(report.elems.params, report.shard_group_ranks)
                                : state_elems(units, report.shard_group_ranks, report.options);
    const std::vector<LedgerEstimate> grouped = estimate_ledgers(node, report.options);
    std::copy(grouped.begin() + 1, grouped.end(), report.stages.begin() + 1);
  }
  report.traffic = traffic_report(
      units,
      {.world = flags.world, .gpus_per_node = flags.gpus_per_node, .forward_order = forward_order},
      traffic_features(flags, report.options));
  return report;
}

// The activation term: one micro-batch's bytes by kind with the formula, then each stage's model
// states plus activations. No stage shards activations, so the term is the same at every stage.
void print_activations(const Report& report) {
  const ActivationEstimate& activations = report.activations;
  const std::string batch =
      report.seq_len > 0 ? fmt::format("B = {} sequences of T = {} tokens", report.micro_batch,
                                       report.seq_len)
                         : fmt::format("B = {} rows", report.micro_batch);
  const bool sixteen = report.seq_len > 0 && report.options.precision != DType::F32;
  fmt::print(
      "\nactivations per GPU for a micro-batch of {}, activation checkpointing {} ({}; no stage "
      "shards them): {} = {} bytes\n",
      batch, activation_policy_name(report.activation_policy),
      sixteen ? fmt::format("matrix products' inputs and outputs in {}, the rest fp32",
                            dtype_name(report.options.precision))
              : "fp32",
      activations.formula, activations.total_bytes());
  for (int k = 0; k < kActivationKindCount; ++k) {
    const auto kind = static_cast<ActivationKind>(k);
    if (activations.bytes_of(kind) == 0) continue;
    fmt::print("  {:<11} {:>16} bytes  {:>12} GB\n", activation_kind_name(kind),
               activations.bytes_of(kind), gb(activations.bytes_of(kind)));
  }
  if (activations.host_bytes > 0) {
    fmt::print("  and the checkpoints in host memory (--cpu-checkpointing), not counted above: {} "
               "bytes, {} GB\n",
               activations.host_bytes, gb(activations.host_bytes));
  }
  fmt::print("\n{:<8} {:>16} {:>14} {:>12} {:>16}\n", "stage", "model_states_GB", "activations_GB",
             "total_GB", "total_bytes");
  for (const LedgerEstimate& stage : report.stages) {
    const std::int64_t total = stage.total_bytes() + activations.total_bytes();
    fmt::print("{:<8} {:>16} {:>14} {:>12} {:>16}\n", stage_name(stage.stage),
               gb(stage.total_bytes()), gb(activations.total_bytes()), gb(total), total);
  }
}

void print_table(const Report& report) {
  const StateElems& elems = report.elems;
  const EstimateOptions& options = report.options;
  const int p = training_bytes_per_param(options.precision);
  fmt::print("model states per GPU for Ψ = {} parameters{} on N = {} GPUs\n", elems.params,
             report.shape.empty() ? "" : " (" + report.shape + ")", elems.world);
  if (elems.padded_row_elems > 0) {
    fmt::print(
        "wte is padded to a multiple of {} rows: {} elements of zero rows past the vocabulary are "
        "allocated, part of Ψp below, not of Ψ\n",
        kVocabPaddingMultiple, elems.padded_row_elems);
  }
  if (elems.padded()) {
    fmt::print(
        "Ψp = {} elements: each of the {} units padded with zeros to a multiple of N·64 = {} "
        "(+{} elements with the padded rows, {:.4f}% of Ψ); a sharded term (/N) is one rank's "
        "S = Ψp/N = {} elements\n",
        elems.replica_elems, elems.units, std::int64_t{elems.world} * kNormBlockElems,
        elems.padding_elems(), 100.0 * static_cast<double>(elems.padding_elems()) / elems.params,
        elems.shard_elems);
    if (elems.persistent_units > 0) {
      fmt::print(
          "Ψw = {} padded elements in {} of the {} units, those with fewer than {} elements "
          "(--persistence-threshold): ZeRO-3 keeps them whole on every rank\n",
          elems.persistent_elems, elems.persistent_units, elems.units,
          options.persistence_threshold_elems);
    } else if (options.persistence_threshold_elems == 0) {
      fmt::print(
          "Ψw = 0: --persistence-threshold 0 keeps no unit whole, so ZeRO-3 shards every "
          "unit\n");
    } else {
      fmt::print(
          "Ψw = 0: no unit has fewer than {} elements (--persistence-threshold), so ZeRO-3 "
          "shards every unit\n",
          options.persistence_threshold_elems);
    }
  } else {
    fmt::print(
        "a bare count: no units, no padding, nothing persistent; a sharded term (/N) is one "
        "rank's shard of ceil(Ψ/N) = {} elements\n",
        elems.shard_elems);
  }
  const bool offloaded_master = options.optimizer_tier != OffloadTier::None;
  const std::string master =
      options.precision != DType::F32 || offloaded_master
          ? fmt::format(
                "fp32 master {} B{}",
                offloaded_master ? 4 : master_bytes_per_param(options.precision),
                offloaded_master ? " (offloaded: the optimizer keeps one in any precision)" : "")
          : std::string("no master copy (the params are fp32)");
  fmt::print("precision {}: params {} B, grads {} B, {}, optimizer {} B per parameter ({})\n",
             dtype_name(options.precision), p, p, master, options.optimizer_bytes_per_param,
             report.optimizer_bytes_given ? "set by --optimizer-bytes" : "AdamW's m and v in fp32");
  if (options.grad_accum_steps > 1) {
    fmt::print(
        "gradient accumulation over {} micro-batches: DDP adds a whole accumulator ({}Ψ), ZeRO-1 "
        "a shard ({}Ψ/N), booked as grads; ZeRO-2 and -3 add into their gradient shard\n",
        options.grad_accum_steps, p, p);
  } else {
    fmt::print("no gradient accumulation (1 micro-batch per optimizer step)\n");
  }
  if (report.shard_group_ranks > 0) {
    fmt::print(
        "--shard-group node: stages 1-3 shard among the G = {} GPUs of a node and the nodes hold "
        "replicas, so their rows count N = G (and Ψp padded for G)\n",
        report.shard_group_ranks);
  }
  if (options.hpz_partition_ranks > 1) {
    fmt::print(
        "K = {}: ZeRO++'s hpZ (--hpz-partition-size); stage 3 also holds a secondary shard of "
        "the parameters among K GPUs, {}Ψ{}/K, which backward gathers from inside the node\n",
        options.hpz_partition_ranks, p, elems.padded() ? "p" : "");
  }
  fmt::print(
      "1 GB = 1e9 bytes; unpadded_bytes: the stage on the bare Ψ (nothing padded or persistent, "
      "DeepSpeed's accounting); extra_bytes = total_bytes - unpadded_bytes\n\n");
  fmt::print("{:<8} {:>12} {:>12} {:>12} {:>13} {:>12} {:>16} {:>16} {:>11}  {}\n", "stage",
             "params_GB", "grads_GB", "master_GB", "optimizer_GB", "total_GB", "total_bytes",
             "unpadded_bytes", "extra_bytes", "formula");
  for (std::size_t s = 0; s < report.stages.size(); ++s) {
    const LedgerEstimate& stage = report.stages[s];
    const std::int64_t unpadded = report.unpadded[s].total_bytes();
    fmt::print("{:<8} {:>12} {:>12} {:>12} {:>13} {:>12} {:>16} {:>16} {:>11}  {} = {}\n",
               stage_name(stage.stage), gb(stage.params_bytes), gb(stage.grads_bytes),
               gb(stage.master_bytes), gb(stage.optimizer_bytes), gb(stage.total_bytes()),
               stage.total_bytes(), unpadded, stage.total_bytes() - unpadded, stage.formula,
               stage.total_formula);
  }
  if (offloaded(options)) print_placements(report.stages, options);
  print_traffic(report.traffic);
  if (report.micro_batch > 0) print_activations(report);
  if (report.budget) print_fit(elems.world, *report.budget, report.fit);
}

void print_json(const Report& report) {
  const StateElems& elems = report.elems;
  const EstimateOptions& options = report.options;
  nlohmann::ordered_json out = {
      {"model", string_or_null(report.model)},
      {"shape", report.shape_json},
      {"params", elems.params},
      {"world", elems.world},
      {"precision", dtype_name(options.precision)},
      {"grad_accum_steps", options.grad_accum_steps},
      {"hpz_partition_size", std::max(options.hpz_partition_ranks, 1)},
      {"shard_group_ranks", report.shard_group_ranks > 0
                                ? nlohmann::ordered_json(report.shard_group_ranks)
                                : nlohmann::ordered_json()},
      {"persistence_threshold_elems",
       elems.padded() ? nlohmann::ordered_json(options.persistence_threshold_elems)
                      : nlohmann::ordered_json()},
      {"units", elems.units},
      {"padded_elems", elems.replica_elems},
      {"padding_elems", elems.padding_elems()},
      {"padded_row_elems", elems.padded_row_elems},
      {"shard_elems", elems.shard_elems},
      {"persistent_units", elems.persistent_units},
      {"persistent_elems", elems.persistent_elems},
      {"param_bytes_per_param", training_bytes_per_param(options.precision)},
      {"grad_bytes_per_param", training_bytes_per_param(options.precision)},
      {"master_bytes_per_param",  // offloaded, the optimizer keeps an fp32 master in any precision
       options.optimizer_tier != OffloadTier::None ? 4 : master_bytes_per_param(options.precision)},
      {"optimizer_bytes_per_param", options.optimizer_bytes_per_param},
      {"offload_optimizer", offload_tier_name(options.optimizer_tier)},
      {"offload_param", offload_tier_name(options.param_tier)},
      {"param_buffer_count", options.param_buffer_count},
      {"param_buffer_elems", options.param_buffer_elems},
      {"param_max_in_cpu_elems", options.param_max_in_cpu_elems},
      {"stages", nlohmann::ordered_json::array()},
  };
  const nlohmann::ordered_json activation_bytes =
      report.micro_batch > 0 ? nlohmann::ordered_json(report.activations.total_bytes())
                             : nlohmann::ordered_json();
  for (std::size_t s = 0; s < report.stages.size(); ++s) {
    const LedgerEstimate& stage = report.stages[s];
    const std::int64_t unpadded = report.unpadded[s].total_bytes();
    out["stages"].push_back(
        {{"stage", stage.stage},
         {"name", stage_name(stage.stage)},
         {"params_bytes", stage.params_bytes},
         {"grads_bytes", stage.grads_bytes},
         {"grad_accum_bytes", stage.grad_accum_bytes},
         {"master_bytes", stage.master_bytes},
         {"optimizer_bytes", stage.optimizer_bytes},
         {"total_bytes", stage.total_bytes()},
         {"unpadded_total_bytes", unpadded},
         {"extra_bytes", stage.total_bytes() - unpadded},
         {"formula", stage.formula},
         {"total_formula", stage.total_formula},
         {"host_params_bytes", stage.host_params_bytes},
         {"host_master_bytes", stage.host_master_bytes},
         {"host_optimizer_bytes", stage.host_optimizer_bytes},
         {"nvme_master_bytes", stage.nvme_master_bytes},
         {"nvme_optimizer_bytes", stage.nvme_optimizer_bytes},
         {"nvme_params_bytes", stage.nvme_params_bytes},
         {"host_bytes", stage.host_bytes()},
         {"disk_bytes", stage.disk_bytes()},
         {"host_formula", stage.host_formula},
         {"disk_formula", stage.disk_formula},
         {"activation_bytes", activation_bytes},
         {"total_with_activations_bytes",
          report.micro_batch > 0
              ? nlohmann::ordered_json(stage.total_bytes() + report.activations.total_bytes())
              : nlohmann::ordered_json()}});
  }
  if (report.micro_batch > 0) {
    nlohmann::ordered_json by_kind;
    for (int k = 0; k < kActivationKindCount; ++k) {
      const auto kind = static_cast<ActivationKind>(k);
      by_kind[std::string(activation_kind_name(kind))] = report.activations.bytes_of(kind);
    }
    out["activations"] = {{"micro_batch", report.micro_batch},
                          {"checkpointing", activation_policy_name(report.activation_policy)},
                          {"seq_len", report.seq_len > 0 ? nlohmann::ordered_json(report.seq_len)
                                                         : nlohmann::ordered_json()},
                          {"bytes", report.activations.total_bytes()},
                          {"host_bytes", report.activations.host_bytes},
                          {"formula", report.activations.formula},
                          {"by_kind", by_kind}};
  }
  out["fit"] = report.budget ? fit_json(*report.budget, report.fit) : nlohmann::ordered_json();
  out["traffic"] = traffic_json(report.traffic);
  fmt::print("{}\n", out.dump(2));
}

}  // namespace

CLI::App* add_estimate_command(CLI::App& app, std::function<int()>& run) {
  auto* cmd = app.add_subcommand(
      "estimate",
      "Per-GPU model-state memory (params, grads, master, optimizer) of DDP and ZeRO-1, -2, -3");
  auto flags = std::make_shared<EstimateFlags>();  // kept alive by the callback, which cmd owns
  auto gpt_sizes = std::make_shared<GptConfig>();  // the GPT size flags as typed
  cmd->add_option("--params", flags->params, "Ψ, parameters of the model: 7000000000 or 7e9");
  cmd->add_option("--model", flags->model, "Count Ψ from a model's units instead: mlp or gpt")
      ->check(CLI::IsMember({"mlp", "gpt"}));
  const std::vector<CLI::Option*> mlp_sizes = {
      cmd->add_option("--layers", flags->mlp.layers, "Linear layers of the MLP")
          ->capture_default_str(),
      cmd->add_option("--width", flags->mlp.width, "Hidden width of the MLP")
          ->capture_default_str(),
      cmd->add_option("--in", flags->mlp.in, "Input features of the MLP")->capture_default_str(),
      cmd->add_option("--classes", flags->mlp.classes, "Output classes of the MLP")
          ->capture_default_str(),
  };
  auto* preset = cmd->add_option("--preset", flags->preset,
                                 fmt::format("GPT preset: {}; the size flags override it",
                                             fmt::join(gpt_preset_names(), ", ")));
  auto* n_layer = cmd->add_option("--n-layer", gpt_sizes->n_layer, "Transformer blocks of the GPT")
                      ->capture_default_str();
  auto* n_head =
      cmd->add_option("--n-head", gpt_sizes->n_head, "Attention heads")->capture_default_str();
  auto* n_embd =
      cmd->add_option("--n-embd", gpt_sizes->n_embd, "Channels C")->capture_default_str();
  auto* block_size = cmd->add_option("--block-size", gpt_sizes->block_size, "Context T in tokens")
                         ->capture_default_str();
  auto* vocab =
      cmd->add_option("--vocab", gpt_sizes->vocab, "Vocabulary V in tokens")->capture_default_str();
  cmd->add_option("--world", flags->world, "N, data-parallel GPUs")->required();
  auto* precision =
      cmd->add_option("--precision", flags->precision,
                      "Params and grads in fp32 (4Ψ + 4Ψ + 8Ψ), or bf16 or fp16 with an fp32 "
                      "master (2Ψ + 2Ψ + 4Ψ + 8Ψ)")
          ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
          ->capture_default_str();
  auto* bf16 = cmd->add_flag_callback(
                      "--bf16", [flags] { flags->precision = "bf16"; }, "--precision bf16")
                   ->excludes(precision);
  auto* fp16 = cmd->add_flag_callback(
                      "--fp16", [flags] { flags->precision = "fp16"; }, "--precision fp16")
                   ->excludes(precision)
                   ->excludes(bf16);
  cmd->add_option_function<std::string>(
         "--dtype",
         [flags](const std::string& dtype) {
           flags->precision = dtype == "mixed" ? "bf16" : dtype;
         },
         "Older spelling of --precision: mixed (bf16) or fp32")
      ->check(CLI::IsMember({"mixed", "fp32"}))
      ->excludes(precision)
      ->excludes(bf16)
      ->excludes(fp16);
  cmd->add_option("--grad-accum", flags->grad_accum_steps,
                  "Micro-batches per optimizer step (gradient_accumulation_steps)")
      ->capture_default_str();
  auto* threshold =
      cmd->add_option("--persistence-threshold", flags->persistence_threshold_elems,
                      "ZeRO-3 keeps units with fewer elements than this whole on every rank "
                      "(stage3_param_persistence_threshold)")
          ->capture_default_str();
  cmd->add_option("--optimizer-bytes", flags->optimizer_bytes,
                  "Optimizer state bytes per parameter besides the master copy (AdamW's m and v)")
      ->capture_default_str();
  cmd->add_option("--micro-batch", flags->micro_batch,
                  "Add the activations of a micro-batch of this many rows (MLP) or sequences of "
                  "--block-size tokens (GPT) per rank (train_micro_batch_size_per_gpu)");
  auto* checkpointing = cmd->add_option_function<std::string>(
                               "--activation-checkpointing",
                               [flags](const std::string& text) {
                                 const bool cpu = flags->activations.cpu_checkpoints;
                                 flags->activations = parse_activation_policy(text);
                                 flags->activations.cpu_checkpoints = cpu;
                               },
                               "With --micro-batch: none | full | every:K | selective, as train "
                               "takes it")
                           ->type_name("POLICY");
  auto* cpu_checkpointing =
      cmd->add_flag("--cpu-checkpointing", flags->activations.cpu_checkpoints,
                    "With --activation-checkpointing full or every:K: the checkpoints in host "
                    "memory, as train takes it");
  cmd->add_option("--offload-optimizer", flags->offload_optimizer,
                  "Where the fp32 master and the optimizer state rest: none (the GPU), cpu (host "
                  "memory, ZeRO-Offload) or nvme (a swap file, ZeRO-Infinity), as train takes it")
      ->check(CLI::IsMember({"none", "cpu", "nvme"}))
      ->capture_default_str();
  cmd->add_option("--offload-param", flags->offload_param,
                  "Where ZeRO-3's parameter shards rest: none (the GPU), cpu (host memory) or nvme "
                  "(a swap file, with --offload-optimizer cpu or nvme), as train's --offload-param "
                  "(with --param-nvme-path)")
      ->check(CLI::IsMember({"none", "cpu", "nvme"}))
      ->capture_default_str();
  cmd->add_option("--param-buffer-count", flags->param_buffer_count,
                  "With --offload-param nvme: swap buffers in host memory, each the largest shard "
                  "on disk, as train takes it (offload_param.buffer_count)")
      ->capture_default_str();
  cmd->add_option("--param-buffer-size", flags->param_buffer_elems,
                  "With --offload-param nvme: elements a swap buffer holds at most, as train takes "
                  "it (offload_param.buffer_size)")
      ->capture_default_str()
      ->type_name("ELEMS");
  cmd->add_option("--param-max-in-cpu", flags->param_max_in_cpu_elems,
                  "With --offload-param nvme: elements of shards kept in host memory, as train "
                  "takes it (offload_param.max_in_cpu)")
      ->capture_default_str()
      ->type_name("ELEMS");
  cmd->add_option("--hpz-partition-size", flags->hpz_partition_ranks,
                  "ZeRO++'s hpZ, as train takes it: stage 3 also holds a secondary parameter "
                  "shard among this many GPUs, a node's (1: off)")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()))
      ->capture_default_str();
  cmd->add_option("--gpus-per-node", flags->gpus_per_node,
                  "GPUs a node, as train takes it: the traffic table splits the bytes each GPU "
                  "sends into those inside a node and those across the nodes (default: one node)")
      ->check(CLI::Range(1, std::numeric_limits<int>::max()));
  cmd->add_option_function<std::string>(
         "--shard-group",
         [flags](const std::string& group) { flags->shard_group_node = group == "node"; },
         "As train takes it: stages 1-3 shard over the world, or inside each node of "
         "--gpus-per-node GPUs with the nodes holding replicas (hybrid sharding, HSDP at stage 3)")
      ->check(CLI::IsMember({"world", "node"}))
      ->type_name("world|node")
      ->default_str("world");
  cmd->add_flag("--zero-quantized-weights", flags->quantized_weights,
                "ZeRO++'s qwZ, as train takes it: stage 3 gathers parameters as int8 blocks of 256 "
                "with a scale each");
  cmd->add_flag("--zero-quantized-gradients", flags->quantized_gradients,
                "ZeRO++'s qgZ, as train takes it: stage 3 reduces gradients as int4 blocks of 256, "
                "by all_to_all inside each node and then across");
  cmd->add_option("--device-gb", flags->device_gb,
                  "With --host-gb and --disk-gb: the memory wall, each placement's largest model "
                  "whose states fit one GPU's device, host and disk budgets (decimal GB)");
  cmd->add_option("--host-gb", flags->host_gb, "Host memory one GPU's rank may use (decimal GB)");
  cmd->add_option("--disk-gb", flags->disk_gb, "Disk one GPU's rank may use (decimal GB)");
  cmd->add_flag(
      "--json", flags->json,
      "Print one JSON object: the model, Ψ, N, the options, the padded, shard and persistent "
      "element counts, bytes per parameter, and \"stages\", an array of {stage, name, "
      "params_bytes, grads_bytes, grad_accum_bytes, master_bytes, optimizer_bytes, total_bytes, "
      "unpadded_total_bytes, extra_bytes, formula, total_formula, host_params_bytes, "
      "host_master_bytes, host_optimizer_bytes, nvme_master_bytes, nvme_optimizer_bytes, "
      "nvme_params_bytes, "
      "host_bytes, disk_bytes, host_formula, disk_formula, activation_bytes, "
      "total_with_activations_bytes}; with --micro-batch also \"activations\": {micro_batch, "
      "checkpointing, seq_len, bytes, host_bytes, formula, by_kind}; \"fit\": with the budgets "
      "{device_bytes, host_bytes, disk_bytes, placements: [{offload_optimizer, offload_param, "
      "largest_params, bound_by}]}, else null; \"traffic\": {rank, world, gpus_per_node, nodes, "
      "stages: [{stage, engine, inside_bytes, across_bytes, spanning_bytes, total_bytes, terms: "
      "[{what, collective, level, group_ranks, bytes, formula}]}]}, rank 0's bytes sent per "
      "optimizer step");
  const std::vector<CLI::Option*> gpt_flags = {preset, n_layer, n_head, n_embd, block_size, vocab};
  cmd->callback([&run, flags, gpt_sizes, mlp_sizes, gpt_flags, n_layer, n_head, n_embd, block_size,
                 vocab, threshold, checkpointing, cpu_checkpointing] {
    const auto given = [](CLI::Option* option) { return option->count() > 0; };
    flags->mlp_sizes_given = std::ranges::any_of(mlp_sizes, given);
    flags->gpt_sizes_given = std::ranges::any_of(gpt_flags, given);
    flags->persistence_threshold_given = given(threshold);
    ZL_CHECK(!given(checkpointing) || flags->micro_batch,
             "--activation-checkpointing changes the activations: give --micro-batch B too");
    ZL_CHECK(!given(cpu_checkpointing) ||
                 flags->activations.recompute == Recompute::Full,
             "--cpu-checkpointing keeps full checkpoints in host memory: give "
             "--activation-checkpointing full or every:K too");
    if (flags->model == "gpt") {
      // The preset's shape (GptConfig's defaults without one), then each size flag given.
      GptConfig gpt = flags->preset.empty() ? GptConfig{} : gpt_preset(flags->preset);
      if (given(n_layer)) gpt.n_layer = gpt_sizes->n_layer;
      if (given(n_head)) gpt.n_head = gpt_sizes->n_head;
      if (given(n_embd)) gpt.n_embd = gpt_sizes->n_embd;
      if (given(block_size)) gpt.block_size = gpt_sizes->block_size;
      if (given(vocab)) gpt.vocab = gpt_sizes->vocab;
      flags->gpt = gpt;
    }
    const auto report = std::make_shared<const Report>(make_report(*flags));
    run = [report, json = flags->json] {
      if (json) {
        print_json(*report);
      } else {
        print_table(*report);
      }
      return 0;
    };
  });
  return cmd;
}

}  // namespace zl
