// train_flags.cpp — the flags of `zerolab train`, bound to TrainConfig fields. --config's DeepSpeed
// file is applied first and the flags on top; a flag's own range check is a one-line usage error
// naming the flag ("--grad-accum 0 is invalid: use 1 or more micro-batches per step").
#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "cli/train_command.hpp"
#include "cli/train_flag_groups.hpp"
#include "core/error.hpp"

namespace zl {

namespace {

const std::map<std::string, EngineKind> kEngineNames = {{"reference", EngineKind::Reference},
                                                        {"ddp", EngineKind::Ddp},
                                                        {"zero1", EngineKind::Zero1},
                                                        {"zero2", EngineKind::Zero2},
                                                        {"zero3", EngineKind::Zero3}};

const std::map<std::string, Backend> kBackendNames = {
    {"sim", Backend::Sim}, {"mpi", Backend::Mpi}, {"nccl", Backend::Nccl}};

const std::map<std::string, MpiReduce> kMpiReduceNames = {
    {"deterministic", MpiReduce::Deterministic}, {"native", MpiReduce::Native}};

const std::map<std::string, ModelKind> kModelNames = {{"mlp", ModelKind::Mlp},
                                                      {"gpt", ModelKind::Gpt}};

const std::map<std::string, DType> kPrecisionNames = {
    {"fp32", DType::F32}, {"bf16", DType::BF16}, {"fp16", DType::F16}};

constexpr std::string_view kDefaultGptPreset = "tiny";
// The GPT's defaults: enough for the tiny preset to learn its Markov language clearly.
constexpr std::int64_t kGptDefaultSteps = 100;
constexpr double kGptDefaultLr = 3e-3;

// Adds `name`, which writes `target` once `accepts` the value; otherwise a one-line usage error
// "<name> <value> is invalid: <use>" (zl::Error during parsing, as --stage 4 is).
template <class T, class Accepts>
CLI::Option* add_checked(CLI::App& cmd, const std::string& name, T& target, Accepts accepts,
                         std::string use, const std::string& help) {
  return cmd
      .add_option_function<T>(
          name,
          [&target, accepts, name, use](const T& value) {
            ZL_CHECK(accepts(value), "{} {} is invalid: {}", name, value, use);
            target = value;
          },
          help)
      ->default_str(fmt::format("{}", target));
}

// As add_checked for a whole number >= `min`.
template <class T>
CLI::Option* add_at_least(CLI::App& cmd, const std::string& name, T& target, T min, std::string use,
                          const std::string& help) {
  return add_checked(
      cmd, name, target, [min](T value) { return value >= min; }, std::move(use), help);
}

// `text` as a whole number, also in DeepSpeed's exponent form (5e8); nullopt for 1.5 or "lots".
std::optional<std::int64_t> whole_number(const std::string& text) {
  const char* const end = text.data() + text.size();
  std::int64_t number = 0;
  if (const auto [stop, error] = std::from_chars(text.data(), end, number);
      error == std::errc() && stop == end) {
    return number;
  }
  double real = 0.0;
  const auto [stop, error] = std::from_chars(text.data(), end, real);
  constexpr double kTwoTo63 = 9223372036854775808.0;
  if (error != std::errc() || stop != end || !std::isfinite(real) || std::floor(real) != real ||
      real < -kTwoTo63 || real >= kTwoTo63) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(real);
}

// A size flag in elements, which also reads as DeepSpeed writes it: --reduce-bucket 5e8.
CLI::Option* add_elems(CLI::App& cmd, const std::string& name, std::int64_t& target,
                       std::int64_t min, std::string use, const std::string& help) {
  return cmd
      .add_option_function<std::string>(
          name,
          [&target, min, name, use](const std::string& text) {
            const std::optional<std::int64_t> elems = whole_number(text);
            ZL_CHECK(elems && *elems >= min, "{} {} is invalid: {}", name, text, use);
            target = *elems;
          },
          help)
      ->type_name("ELEMS")
      ->default_str(fmt::format("{}", target));
}

std::string joined(const std::vector<std::string>& names) {
  return fmt::format("{}", fmt::join(names, ", "));
}

void add_model_flags(CLI::App& cmd, TrainArgs& args) {
  TrainConfig& config = args.config;
  cmd.add_option("--model", config.model, "mlp | gpt")
      ->transform(CLI::CheckedTransformer(kModelNames, CLI::ignore_case))
      ->default_str("mlp");
  cmd.add_option("--layers", config.mlp.layers, "Linear layers of the MLP")->capture_default_str();
  cmd.add_option("--width", config.mlp.width, "Hidden width of the MLP")->capture_default_str();
  cmd.add_option("--in", config.mlp.in, "Input features")->capture_default_str();
  cmd.add_option("--classes", config.mlp.classes, "Output classes")->capture_default_str();
  cmd.add_option_function<std::string>(
         "--preset", [&args](const std::string& name) { args.gpt_preset = name; },
         fmt::format("GPT preset (--model gpt): {}", joined(gpt_preset_names())))
      ->default_str(std::string(kDefaultGptPreset));
  add_gpt_size_flags(cmd, args.gpt_sizes);
  cmd.add_option("--data", config.data,
                 "GPT: train on token files instead of synthetic data: nanoGPT's uint16 .bin or "
                 "llm.c shards, comma-separated, glob patterns allowed (quote them)");
}

void add_feature_flags(CLI::App& cmd, TrainArgs& args) {
  TrainingFeatures& features = args.config.features;
  // A string first: DType's underlying uint8_t would print as a character in --help.
  auto* precision =
      cmd.add_option_function<std::string>(
             "--precision",
             [&features](const std::string& name) {
               features.precision = kPrecisionNames.at(name);
             },
             "Parameters and gradients, held and sent (bf16 and fp16 keep fp32 master weights and "
             "Adam state)")
          ->transform(CLI::IsMember({"fp32", "bf16", "fp16"}, CLI::ignore_case))
          ->default_str("fp32");
  auto* bf16 = cmd.add_flag_callback(
      "--bf16", [&features] { features.precision = DType::BF16; }, "Same as --precision bf16");
  auto* fp16 = cmd.add_flag_callback(
      "--fp16", [&features] { features.precision = DType::F16; }, "Same as --precision fp16");
  precision->excludes(bf16)->excludes(fp16);
  bf16->excludes(fp16);
  LossScaleConfig& scale = features.loss_scale;
  add_checked(
      cmd, "--loss-scale-power", scale.initial_scale_power,
      [](int power) { return power >= 0 && power <= 63; }, "use 0 to 63",
      "fp16: the first loss scale is 2^power (fp16.initial_scale_power)");
  add_at_least(cmd, "--loss-scale-window", scale.window, std::int64_t{1}, "use 1 or more steps",
               "fp16: clean steps before the loss scale doubles (fp16.loss_scale_window)");
  add_at_least(cmd, "--hysteresis", scale.hysteresis, 1, "use 1 or more overflows",
               "fp16: overflows tolerated before the loss scale halves (fp16.hysteresis)");
  add_checked(
      cmd, "--loss-scale", scale.static_scale,
      [](double x) { return std::isfinite(x) && x >= 0.0; }, "use a number >= 0 (0: dynamic)",
      "fp16: a static loss scale (overflowing steps are skipped, the scale never moves); 0 "
      "scales dynamically (fp16.loss_scale)");
  add_checked(
      cmd, "--min-loss-scale", scale.min_scale,
      [](double x) { return std::isfinite(x) && x > 0.0; }, "use a number > 0",
      "fp16: the loss scale never drops below this (fp16.min_loss_scale)");
  add_at_least(cmd, "--grad-accum", features.grad_accum_steps, std::int64_t{1},
               "use 1 or more micro-batches per step",
               "Micro-batches per optimizer step (gradient_accumulation_steps)");
  add_checked(
      cmd, "--clip", features.grad_clip, [](double x) { return std::isfinite(x) && x >= 0.0; },
      "use a norm >= 0 (0: no clipping)",
      "Clip the global gradient norm to this; 0: no clipping (gradient_clipping)");
  add_elems(cmd, "--reduce-bucket", features.reduce_bucket_elems, 1, "use 1 or more elements",
            "Largest gradient collective in elements (reduce_bucket_size)");
  add_elems(cmd, "--allgather-bucket", features.allgather_bucket_elems, 1, "use 1 or more elements",
            "Largest parameter collective in elements (allgather_bucket_size)");
  add_elems(cmd, "--prefetch-bucket", features.prefetch_bucket_elems, 0,
            "use 0 (no prefetch) or more elements",
            "ZeRO-3: elements gathered ahead of the running unit (stage3_prefetch_bucket_size)");
  add_elems(cmd, "--persistence-threshold", features.persistence_threshold_elems, 0,
            "use 0 or more elements",
            "ZeRO-3: units smaller than this stay whole on every rank "
            "(stage3_param_persistence_threshold)");
  cmd.add_flag("--overlap-comm", features.overlap_comm,
               "Reduce gradients (and ZeRO-3: prefetch parameters) while backward goes on "
               "(zero_optimization.overlap_comm)");
  cmd.add_option_function<std::string>(
         "--activation-checkpointing",
         [&args](const std::string& text) {
           const bool cpu = args.config.activations.cpu_checkpoints;  // from --cpu-checkpointing
           args.config.activations = parse_activation_policy(text);
           args.config.activations.cpu_checkpoints = cpu;
         },
         "GPT: none | full (keep each block's output, recompute the block in backward) | every:K "
         "(full on blocks 0, K, 2K, ...) | selective (keep the matrix products, recompute "
         "LayerNorms, attention's softmax core and GELU); results stay bitwise the same "
         "(activation_checkpointing)")
      ->type_name("POLICY");
  cmd.add_flag("--cpu-checkpointing", args.config.activations.cpu_checkpoints,
               "With --activation-checkpointing full or every:K: keep the checkpoints in host "
               "memory (activation_checkpointing.cpu_checkpointing; --accelerator cpu)");
  cmd.add_flag("--offload-optimizer", features.offload_optimizer,
               "ZeRO-Offload: fp32 master and Adam state of the own shard in host memory, updated "
               "there (zero_optimization.offload_optimizer.device cpu)");
  cmd.add_option("--nvme-path", features.nvme_path,
                 "With --offload-optimizer: keep that state in swap files in this folder, each "
                 "unit's part in host memory only for its update (ZeRO-Infinity; "
                 "zero_optimization.offload_optimizer.device nvme and its nvme_path)")
      ->type_name("DIR");
  cmd.add_flag("--offload-param", features.offload_param,
               "ZeRO-3: the own parameter shards in host memory, copied to the device for each "
               "gather (zero_optimization.offload_param.device cpu)")
      ->each([&args](const std::string&) { args.offload_param_flag = true; });
  cmd.add_option("--param-nvme-path", features.param_nvme_path,
                 "With --offload-param and --offload-optimizer: keep the parameter shards in swap "
                 "files in this folder, each unit's in host memory only for a gather or its "
                 "update (ZeRO-Infinity; zero_optimization.offload_param.device nvme and its "
                 "nvme_path)")
      ->type_name("DIR");
  add_swap_flags(cmd, features);
}

void add_output_flags(CLI::App& cmd, TrainArgs& args) {
  TrainOutputs& outputs = args.outputs;
  cmd.add_option("--metrics", outputs.metrics, "Write one JSON line per step to this file");
  cmd.add_option("--summary", outputs.summary, "Write both ledgers of every rank as JSON");
  cmd.add_option("--save-init", outputs.save_init,
                 "Write the initial parameters (fp32 safetensors)");
  cmd.add_option("--save-final", outputs.save_final,
                 "Write the final parameters (fp32 safetensors)");
  cmd.add_option("--save-data", outputs.save_data, "Write the samples used (safetensors x, y)");
  cmd.add_flag("--quiet", outputs.quiet, "Print no per-step lines");
  add_at_least(cmd, "--steps-per-print", outputs.steps_per_print, std::int64_t{1},
               "use 1 or more steps", "Print a progress line every K steps and after the last");
  cmd.add_option(
      "--checkpoint-dir", args.checkpoints.dir,
      "Save sharded checkpoints here (DIR/step-N/rank-R.safetensors, manifest.json, DIR/latest)");
  add_at_least(cmd, "--checkpoint-every", args.checkpoints.every_steps, std::int64_t{1},
               "use 1 or more steps (without the flag only the last step is saved)",
               "Save after every K steps (the last step is always saved)")
      ->type_name("K")
      ->default_str("");
  cmd.add_option("--resume", args.checkpoints.resume,
                 "Continue from a checkpoint (any stage, any world); --steps stays the run's "
                 "total; the optimizer, schedule and seed settings are the checkpoint's");
  cmd.add_flag("--resume-override", args.checkpoints.override_settings,
               "With --resume: let the flags change the checkpoint's optimizer, schedule or seed "
               "settings (each change is printed) instead of refusing them");
  cmd.add_option("--trace", outputs.trace,
                 "Write the simulated timeline as a Chrome trace (open in Perfetto or "
                 "chrome://tracing)")
      ->type_name("FILE");
  add_at_least(cmd, "--what-if-world", outputs.what_if_world, 1, "use 1 or more ranks",
               "Predict step time, exposed comm and memory of this run on N ranks")
      ->type_name("N")
      ->default_str("");
}

std::vector<std::string> preset_names(const auto& presets) {
  std::vector<std::string> names;
  for (const auto& preset : presets) names.push_back(preset.name);
  return names;
}

void add_timeline_flags(CLI::App& cmd, TrainConfig& config) {
  cmd.add_option_function<std::string>(
         "--link", [&config](const std::string& name) { config.link = link_preset(name); },
         fmt::format("Link the simulated collectives are timed on: {} (docs/timeline.md)",
                     joined(preset_names(link_presets()))))
      ->type_name("NAME")
      ->default_str(std::string(kDefaultLink));
  cmd.add_option_function<std::string>(
         "--link-across",
         [&config](const std::string& name) { config.link_across = link_preset(name); },
         fmt::format("Link between nodes, one NIC's, with --gpus-per-node: {} (docs/timeline.md)",
                     joined(preset_names(link_presets()))))
      ->type_name("NAME")
      ->default_str(std::string(kDefaultLinkAcross));
  add_at_least(cmd, "--nics-per-node", config.nics_per_node, 1, "use 1 or more NICs a node",
               "NICs a node, each a --link-across, shared by its GPUs (default: one per GPU)");
  cmd.add_option_function<std::string>(
         "--host-link",
         [&config](const std::string& name) { config.host_link = host_link_preset(name); },
         fmt::format("Link the simulated host-device copies of offload are timed on: {} "
                     "(docs/timeline.md)",
                     joined(preset_names(host_link_presets()))))
      ->type_name("NAME")
      ->default_str(std::string(kDefaultHostLink));
  cmd.add_option_function<std::string>(
         "--disk-link",
         [&config](const std::string& name) { config.disk_link = disk_link_preset(name); },
         fmt::format("Link the simulated swap-file reads and writes of the NVMe tier are timed on: "
                     "{}, or a bandwidth in GB/s (what zerolab bench nvme measured) "
                     "(docs/timeline.md)",
                     joined(preset_names(disk_link_presets()))))
      ->type_name("NAME|GBPS")
      ->default_str(std::string(kDefaultDiskLink));
  cmd.add_option_function<std::string>(
         "--device", [&config](const std::string& name) { config.device = device_preset(name); },
         fmt::format("Scale measured CPU compute to this device: {} (cpu: as measured)",
                     joined(preset_names(device_presets()))))
      ->type_name("NAME")
      ->default_str("cpu");
}

// What a run does with non-finite steps, slow or faulty ranks, and too little memory.
void add_fault_flags(CLI::App& cmd, TrainConfig& config) {
  cmd.add_flag_callback(
      "--skip-nonfinite", [&config] { config.nonfinite = NonFinitePolicy::Skip; },
      "Skip the update of a step whose gradient norm is NaN or infinite (on every rank; Adam's "
      "step count does not advance) instead of stopping");
  cmd.add_option_function<std::int64_t>(
         "--collective-timeout-ms",
         [&config](std::int64_t ms) { config.collective_timeout = std::chrono::milliseconds(ms); },
         "Longest a rank waits in one collective before the run fails (every backend; nccl aborts "
         "its communicator)")
      ->default_str(std::to_string(config.collective_timeout.count()));
  cmd.add_option_function<std::vector<std::string>>(
         "--inject-fault",
         [&config](const std::vector<std::string>& specs) {
           for (const auto& spec : specs) {
             config.faults.push_back(parse_fault_spec(spec, "--inject-fault"));
           }
         },
         "Inject a fault into a simulated rank's collective calls (repeatable); kinds: throw, skip "
         "(the rank leaves the call out), slow (it arrives after the timeout)")
      ->type_name(std::string(kFaultSpecForm));
  cmd.add_flag_callback(
      "--no-memory-check", [&config] { config.check_memory = false; },
      "Run even when the ranks' model states and activations (as zerolab estimate counts them) "
      "exceed the host memory available");
}

// Where the ranks run and compute: --backend, --accelerator, --attention, --mpi-reduce.
void add_placement_flags(CLI::App& cmd, TrainArgs& args) {
  TrainConfig& config = args.config;
  // Strings first, as for --precision: the enums' uint8_t would print as characters in --help.
  cmd.add_option_function<std::string>(
         "--backend",
         [&config](const std::string& name) { config.backend = kBackendNames.at(name); },
         "sim: W ranks as threads in this process | mpi: one rank per process under mpirun -np W "
         "| nccl: one rank per process and GPU, under mpirun or torchrun-style RANK, WORLD_SIZE, "
         "LOCAL_RANK (docs/backends.md)")
      ->transform(CLI::IsMember({"sim", "mpi", "nccl"}, CLI::ignore_case))
      ->default_str("sim");
  add_accelerator_flag(cmd, config.accelerator, &args.accelerator_given)
      ->default_str("cpu (cuda with --backend nccl)");
  cmd.add_option_function<std::string>(
         "--attention",
         [&args](const std::string& name) {
           args.config.attention = name == "fast" ? AttentionKind::Fast : AttentionKind::Exact;
         },
         "GPT attention kernels on CUDA: exact (the CPU's bits) | fast (tensor cores, bf16 "
         "products, fp32 sums; head sizes 16, 32, 64; repeatable bit for bit)")
      ->transform(CLI::IsMember({"exact", "fast"}, CLI::ignore_case))
      ->default_str("fast under --bf16 on CUDA where the head size allows, else exact");
  cmd.add_option_function<std::string>(
         "--mpi-reduce",
         [&args](const std::string& name) {
           args.config.mpi_reduce = kMpiReduceNames.at(name);
           args.mpi_reduce_given = true;
         },
         "--backend mpi: deterministic (rank-order sums, bitwise the sim's) | native (MPI's own "
         "reductions, close to the sim's)")
      ->transform(CLI::IsMember({"deterministic", "native"}, CLI::ignore_case))
      ->default_str("deterministic");
}

}  // namespace

void add_train_flags(CLI::App& cmd, TrainArgs& args) {
  TrainConfig& config = args.config;
  // First on purpose: CLI11 runs option callbacks in the order the options were added, so the
  // file's values land before any other flag's, wherever --config stands on the line.
  cmd.add_option_function<std::string>(
         "--config",
         [&args](const std::string& path) {
           args.ds_config = load_ds_config(path, args.config_warnings);
           apply_ds_config(*args.ds_config, args.config, args.outputs.steps_per_print);
           args.settings_given |= settings_of(*args.ds_config);
         },
         "DeepSpeed JSON config (docs/configs.md); the flags given beside it override its values")
      ->type_name("FILE");
  cmd.add_flag("--strict", args.strict,
               "With --config: keys zerolab does not implement and unknown keys are errors, not "
               "warnings");
  add_model_flags(cmd, args);
  auto* engine =
      cmd.add_option("--engine", config.engine, "reference | ddp | zero1 | zero2 | zero3")
          ->transform(CLI::CheckedTransformer(kEngineNames, CLI::ignore_case))
          ->default_str("ddp");
  cmd.add_option_function<int>(
         "--stage", [&config](int stage) { config.engine = engine_of_stage(stage); },
         "ZeRO stage: 0 (DDP), 1, 2 or 3 (same choice as --engine)")
      ->excludes(engine);
  add_placement_flags(cmd, args);
  cmd.add_option("--world", config.world,
                 "Number of ranks W (--backend mpi: mpirun's -np unless given, and it must match)")
      ->capture_default_str()
      ->each([&args](const std::string&) { args.world_given = true; });
  add_at_least(cmd, "--gpus-per-node", config.gpus_per_node, 1,
               "use 1 or more, a divisor of --world",
               "GPUs a node (torchrun's --nproc-per-node): reductions sum each node's ranks, then "
               "the nodes (default: every rank on one node; mpi and nccl: the launcher's)")
      ->each([&args](const std::string&) { args.gpus_per_node_given = true; });
  cmd.add_option_function<std::string>(
         "--shard-group",
         [&args](const std::string& group) { args.shard_group_node = group == "node"; },
         "ZeRO-3 shards over the whole world, or inside each node of --gpus-per-node ranks and "
         "replicates across the nodes (FSDP's HYBRID_SHARD, HSDP)")
      ->check(CLI::IsMember({"world", "node"}))
      ->type_name("world|node")
      ->default_str("world");
  add_at_least(cmd, "--hpz-partition-size", config.features.hpz_partition_ranks, 1,
               "use 1 (off) or the GPUs of a node, a divisor of --world",
               "ZeRO++'s hpZ (zero_hpz_partition_size): ZeRO-3 keeps a secondary shard among this "
               "many ranks, a node's, and backward gathers from it instead of the world")
      ->default_str("1");
  cmd.add_flag("--zero-quantized-weights", config.features.quantized_weights,
               "ZeRO++'s qwZ (zero_quantized_weights): ZeRO-3 gathers parameters as int8 blocks "
               "of 256 with a scale each; not bitwise, within the quantizer's bound");
  cmd.add_flag("--zero-quantized-gradients", config.features.quantized_gradients,
               "ZeRO++'s qgZ (zero_quantized_gradients): ZeRO-3 reduces gradients as int4 blocks "
               "of 256, by all_to_all inside each node and then across; not bitwise");
  add_threads_flag(cmd, config.threads);
  cmd.add_option("--steps", config.steps, "Optimizer steps (--model gpt: 100 unless given)")
      ->capture_default_str()
      ->each([&args](const std::string&) { args.steps_given = true; });
  cmd.add_option("--micro-batch", config.micro_batch, "Rows per rank per micro-step")
      ->capture_default_str();
  add_feature_flags(cmd, args);
  add_optimizer_flags(cmd, args);
  add_fault_flags(cmd, config);
  add_output_flags(cmd, args);
  add_timeline_flags(cmd, config);
  cmd.add_option("--init", config.init_file,
                 "Start from these parameters (fp32 safetensors with the model's names, e.g. from "
                 "zerolab consolidate or --save-final, or a Hugging Face GPT-2 folder)");
}

void finish_train_args(TrainArgs& args) {
  TrainConfig& config = args.config;
  if (config.threads == 0) config.threads = threads_from_env();
  const GptOverrides& sizes = args.gpt_sizes;
  if (config.model != ModelKind::Gpt) {
    const std::pair<bool, std::string_view> gpt_only[] = {
        {args.gpt_preset.has_value(), "--preset"},
        {sizes.n_layer.has_value(), "--n-layer"},
        {sizes.n_head.has_value(), "--n-head"},
        {sizes.n_embd.has_value(), "--n-embd"},
        {sizes.block_size.has_value(), "--block-size"},
        {sizes.vocab.has_value(), "--vocab"},
        {!config.data.empty(), "--data"},
        {config.attention != AttentionKind::Default, "--attention"}};
    for (const auto& [given, flag] : gpt_only) {
      ZL_CHECK(!given, "{} needs --model gpt", flag);
    }
  } else {
    config.gpt = gpt_preset(args.gpt_preset.value_or(std::string(kDefaultGptPreset)));
    if (!args.steps_given) config.steps = kGptDefaultSteps;
    const bool file_lr =
        args.ds_config && (args.ds_config->adamw || args.ds_config->scheduler_peak_lr);
    if (!args.lr_given && !file_lr) config.adamw.lr = kGptDefaultLr;
    apply_gpt_sizes(sizes, config.gpt);
  }
  // The other engines hold no parameter shards and ignore it, as DeepSpeed below stage 3 does;
  // asked for by flag, it is a mistake worth saying.
  ZL_CHECK(!args.offload_param_flag || config.engine == EngineKind::Zero3,
           "--offload-param offloads ZeRO-3's parameter shards: use --stage 3, or drop it");
  ZL_CHECK(!args.mpi_reduce_given || config.backend == Backend::Mpi,
           "--mpi-reduce needs --backend mpi: the sim backend always reduces in rank order");
  if (config.backend == Backend::Nccl && !args.accelerator_given) {
    config.accelerator = Accelerator::Cuda;
  }
  // With --backend mpi or nccl and no --world, the world is known at launch: launch_config()
  // checks it.
  const bool world_at_launch = config.backend != Backend::Sim && !args.world_given;
  if (args.ds_config && !world_at_launch) check_train_batch_size(*args.ds_config, config);
}

TrainConfig launch_config(const TrainArgs& args) {
  TrainConfig config = args.config;
  const std::optional<int> launched = launched_world(config.backend);
  if (launched && !args.world_given) {
    config.world = *launched;
    if (args.ds_config) check_train_batch_size(*args.ds_config, config);
  }
  // Only for the launched world: another --world fails its own check when the ranks start.
  const std::optional<int> local = launched_gpus_per_node(config.backend);
  if (local && !args.gpus_per_node_given && launched == config.world) {
    ZL_CHECK(config.world % *local == 0,
             "the launcher put {} ranks on this node, which does not divide the world of {}: "
             "launch as many ranks on every node, or pass --gpus-per-node",
             *local, config.world);
    if (*local < config.world) config.gpus_per_node = *local;
  }
  if (args.shard_group_node) {
    config.features.shard_group_ranks = ranks_per_node(config.world, config.gpus_per_node);
  }
  return config;
}

TrainArgs parse_train_args(const std::vector<std::string>& args) {
  TrainArgs parsed;
  CLI::App app{"zerolab train"};
  add_train_flags(app, parsed);
  app.parse(std::vector<std::string>(args.rbegin(), args.rend()));  // CLI11 takes them reversed
  finish_train_args(parsed);
  return parsed;
}

}  // namespace zl
