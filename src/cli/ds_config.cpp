// ds_config.cpp — reads a DeepSpeed JSON config: each section is a table from key to a reader
// that checks the value's type and range; keys outside the tables are warnings, never errors, so
// a config written for DeepSpeed runs here with what zerolab honours.
#include "cli/ds_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli/ds_json.hpp"
#include "cli/ds_offload.hpp"
#include "cli/ds_scheduler.hpp"
#include "core/error.hpp"
#include "run/memory_check.hpp"

namespace zl {

namespace {

using ds::Checker;
using ds::json;
using ds::Readers;
using ds::shown;

// What DeepSpeed's FusedAdam uses for params a config leaves out (note weight_decay 0, where
// zerolab's --weight-decay defaults to PyTorch AdamW's 0.01).
constexpr AdamWConfig kDeepSpeedAdamDefaults{
    .lr = 1e-3, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8, .weight_decay = 0.0};

bool positive(double x) {
  return x > 0.0;
}
bool non_negative(double x) {
  return x >= 0.0;
}
bool beta_range(double x) {
  return x >= 0.0 && x < 1.0;
}

constexpr std::int64_t kIntMax = std::numeric_limits<int>::max();

// The largest config file read: real ones are a few KiB.
constexpr std::size_t kMaxConfigBytes = std::size_t{1} << 20;

// reduce_bucket_size 0: each unit's gradient is reduced whole, in one call.
constexpr std::int64_t kNoBucketLimit = std::numeric_limits<std::int64_t>::max();

// offload_param.max_in_cpu's default in DeepSpeed (offload_config.py): 1e9 elements.
constexpr std::int64_t kDsMaxInCpuElems = 1'000'000'000;

// fp16.*: the loss scaler, dynamic (loss_scale 0) or static (loss_scale > 0).
Readers fp16_readers(const Checker& check, DsConfig& ds, std::optional<bool>& enabled) {
  return {
      {"enabled", [&](const json& v, const std::string& p) { enabled = check.boolean(v, p); }},
      {"loss_scale",
       [&](const json& v, const std::string& p) {
         ds.static_loss_scale =
             check.real(v, p, non_negative, "use 0 (dynamic scaling) or a static scale > 0");
       }},
      {"initial_scale_power",
       [&](const json& v, const std::string& p) {
         ds.initial_scale_power = static_cast<int>(check.whole(v, p, 0, 63, "use 0 to 63"));
       }},
      {"loss_scale_window",
       [&](const json& v, const std::string& p) {
         ds.loss_scale_window = check.at_least(v, p, 1, "use 1 or more steps");
       }},
      {"hysteresis",
       [&](const json& v, const std::string& p) {
         ds.hysteresis = static_cast<int>(check.whole(v, p, 1, kIntMax, "use 1 or more overflows"));
       }},
      {"min_loss_scale",
       [&](const json& v, const std::string& p) {
         ds.min_loss_scale = check.real(v, p, positive, "use a number > 0");
       }},
  };
}

Readers zero_readers(const Checker& check, DsConfig& ds) {
  return {
      {"cpu_offload",  // DeepSpeed's older spelling of offload_optimizer.device "cpu"
       [&](const json& v, const std::string& p) {
         if (check.boolean(v, p)) ds.offload_optimizer_device = "cpu";
       }},
      {"cpu_offload_params",  // the older spelling of offload_param.device "cpu"
       [&](const json& v, const std::string& p) {
         if (check.boolean(v, p)) ds.offload_param_device = "cpu";
       }},
      {"offload_param",
       [&](const json& v, const std::string& p) {
         check.section(v, p, ds::offload_param_readers(check, ds));
       }},
      {"stage",
       [&](const json& v, const std::string& p) {
         ds.engine = engine_of_stage(static_cast<int>(check.whole(v, p, 0, 3, "use 0, 1, 2 or 3")));
       }},
      {"reduce_bucket_size",  // 0: DeepSpeed reduces each gradient whole, as soon as it is ready
       [&](const json& v, const std::string& p) {
         const std::int64_t elems = check.at_least(v, p, 0, "use 0 (no limit) or more elements");
         ds.reduce_bucket_elems = elems == 0 ? kNoBucketLimit : elems;
       }},
      {"allgather_bucket_size",
       [&](const json& v, const std::string& p) {
         ds.allgather_bucket_elems = check.at_least(v, p, 1, "use 1 or more elements");
       }},
      {"stage3_prefetch_bucket_size",
       [&](const json& v, const std::string& p) {
         ds.prefetch_bucket_elems = check.at_least(v, p, 0, "use 0 (no prefetch) or more elements");
       }},
      {"stage3_param_persistence_threshold",
       [&](const json& v, const std::string& p) {
         ds.persistence_threshold_elems = check.at_least(v, p, 0, "use 0 or more elements");
       }},
      {"overlap_comm",
       [&](const json& v, const std::string& p) { ds.overlap_comm = check.boolean(v, p); }},
      {"mics_shard_size",
       [&](const json& v, const std::string& p) {
         constexpr std::string_view kUse = "use -1 (off) or the GPUs of a node";
         const auto ranks = static_cast<int>(check.whole(v, p, -1, kMaxSimWorld, kUse));
         if (ranks == 0) check.bad(p, v, kUse);
         if (ranks > 0) ds.mics_shard_ranks = ranks;
       }},
      {"zero_hpz_partition_size",
       [&](const json& v, const std::string& p) {
         ds.hpz_partition_ranks = static_cast<int>(
             check.whole(v, p, 1, kMaxSimWorld, "use 1 (off) or the GPUs of a node"));
       }},
      {"zero_quantized_weights",
       [&](const json& v, const std::string& p) { ds.quantized_weights = check.boolean(v, p); }},
      {"zero_quantized_gradients",
       [&](const json& v, const std::string& p) { ds.quantized_gradients = check.boolean(v, p); }},
      {"contiguous_gradients",
       [&](const json& v, const std::string& p) { ds.contiguous_gradients = check.boolean(v, p); }},
      {"offload_optimizer",
       [&](const json& v, const std::string& p) {
         check.section(v, p, ds::offload_optimizer_readers(check, ds));
       }},
  };
}

Readers adam_params_readers(const Checker& check, AdamWConfig& adamw) {
  return {
      {"lr",
       [&](const json& v, const std::string& p) {
         adamw.lr = check.real(v, p, positive, "use a number > 0");
       }},
      {"betas",
       [&](const json& v, const std::string& p) {
         constexpr std::string_view kUse = "use [beta1, beta2], each in [0, 1)";
         if (!v.is_array() || v.size() != 2) check.bad(p, v, kUse);
         for (const json& beta : v) {
           if (!beta.is_number() || !beta_range(beta.get<double>())) check.bad(p, v, kUse);
         }
         adamw.beta1 = v[0].get<double>();
         adamw.beta2 = v[1].get<double>();
       }},
      {"eps",
       [&](const json& v, const std::string& p) {
         adamw.eps = check.real(v, p, non_negative, "use a number >= 0");
       }},
      {"weight_decay",
       [&](const json& v, const std::string& p) {
         adamw.weight_decay = check.real(v, p, non_negative, "use a number >= 0");
       }},
      {"adam_w_mode",
       [&](const json& v, const std::string& p) {
         if (!check.boolean(v, p)) {
           check.bad(p, v, "zerolab trains with AdamW only: use true or leave it out");
         }
       }},
  };
}

// The optimizer types DeepSpeed runs as AdamW (unless adam_w_mode is false), as its config
// lowercases them: "deepspeed_adam" is DeepSpeed's older name of DeepSpeedCPUAdam (adam_w_mode
// true by default), which DeepSpeedExamples' Megatron offload configs spell "DeepSpeed_Adam".
constexpr std::string_view kAdamTypes[] = {"adamw", "adam", "deepspeed_adam"};

// optimizer: {"type": "AdamW" | "Adam" | "DeepSpeed_Adam", "params": {...}}; DeepSpeed matches
// the type ignoring case.
AdamWConfig read_optimizer(const Checker& check, const json& value, const std::string& path) {
  AdamWConfig adamw = kDeepSpeedAdamDefaults;
  bool has_type = false;
  check.section(value, path,
                {{"type",
                  [&](const json& v, const std::string& p) {
                    std::string type = v.is_string() ? v.get<std::string>() : std::string();
                    std::ranges::transform(type, type.begin(), [](unsigned char c) {
                      return static_cast<char>(std::tolower(c));
                    });
                    has_type = true;
                    if (std::ranges::find(kAdamTypes, type) == std::end(kAdamTypes)) {
                      check.bad(p, v, "use AdamW, or Adam with adam_w_mode true");
                    }
                  }},
                 {"params", [&](const json& v, const std::string& p) {
                    check.section(v, p, adam_params_readers(check, adamw));
                  }}});
  if (!has_type) fail("{}: {}.type is missing: use AdamW", check.source(), path);
  return adamw;
}

// activation_checkpointing.*: the section turns on full checkpointing of every block, with the
// checkpoints in host memory when cpu_checkpointing is true; the keys about DeepSpeed's buffers
// and model parallelism have nothing to act on here.
Readers activation_readers(const Checker& check, bool& cpu_checkpointing) {
  const auto accepted = [&check](const json& v, const std::string& p) { check.boolean(v, p); };
  return {
      {"partition_activations",
       [&check](const json& v, const std::string& p) {
         if (check.boolean(v, p)) {
           check.warn(p, "is true: zerolab has no model parallelism to partition across; ignored");
         }
       }},
      {"cpu_checkpointing",
       [&check, &cpu_checkpointing](const json& v, const std::string& p) {
         cpu_checkpointing = check.boolean(v, p);
       }},
      {"contiguous_memory_optimization", accepted},
      {"synchronize_checkpoint_boundary", accepted},
      {"profile", accepted},
      {"number_checkpoints",
       [&check](const json& v, const std::string& p) {
         if (!v.is_null()) check.at_least(v, p, 1, "use 1 or more checkpoints, or null");
       }},
  };
}

}  // namespace

DsConfig parse_ds_config(std::string_view text, std::string_view source,
                         std::vector<std::string>& warnings) {
  const json root = ds::parse_config(text, source);
  DsConfig ds;
  ds.source = std::string(source);
  const Checker check(source, warnings);
  if (!root.is_object()) fail("{}: the config is {}: use a JSON object", source, shown(root));

  std::optional<bool> bf16_enabled;
  std::optional<bool> fp16_enabled;
  const ds::Reader bf16_section = [&](const json& v, const std::string& p) {
    check.section(v, p, {{"enabled", [&](const json& e, const std::string& ep) {
                            bf16_enabled = check.boolean(e, ep);
                          }}});
  };
  const Readers top = {
      {"train_batch_size",
       [&](const json& v, const std::string& p) {
         ds.train_batch_size = check.at_least(v, p, 1, "use 1 or more samples");
       }},
      {"train_micro_batch_size_per_gpu",
       [&](const json& v, const std::string& p) {
         ds.micro_batch = check.at_least(v, p, 1, "use 1 or more samples per rank");
       }},
      {"gradient_accumulation_steps",
       [&](const json& v, const std::string& p) {
         ds.grad_accum_steps = check.at_least(v, p, 1, "use 1 or more micro-batches per step");
       }},
      {"gradient_clipping",
       [&](const json& v, const std::string& p) {
         ds.grad_clip = check.real(v, p, non_negative, "use a norm >= 0 (0: no clipping)");
       }},
      {"steps_per_print",
       [&](const json& v, const std::string& p) {
         ds.steps_per_print = check.at_least(v, p, 1, "use 1 or more steps");
       }},
      {"bf16", bf16_section},
      {"bfloat16", bf16_section},  // DeepSpeed's older name of the section
      {"fp16",
       [&](const json& v, const std::string& p) {
         check.section(v, p, fp16_readers(check, ds, fp16_enabled));
       }},
      {"zero_optimization",
       [&](const json& v, const std::string& p) { check.section(v, p, zero_readers(check, ds)); }},
      {"aio", [&](const json& v,
                  const std::string& p) { check.section(v, p, ds::aio_readers(check, ds)); }},
      {"optimizer",
       [&](const json& v, const std::string& p) { ds.adamw = read_optimizer(check, v, p); }},
      {"scheduler",
       [&](const json& v, const std::string& p) {
         const ds::DsScheduler scheduler = ds::read_scheduler(check, v, p);
         ds.lr_schedule = scheduler.schedule;
         ds.scheduler_peak_lr = scheduler.peak_lr;
       }},
      {"activation_checkpointing",
       [&](const json& v, const std::string& p) {
         bool cpu_checkpointing = false;
         check.section(v, p, activation_readers(check, cpu_checkpointing));
         ds.activations =
             ActivationPolicy{.recompute = Recompute::Full, .cpu_checkpoints = cpu_checkpointing};
       }},
  };
  check.section(root, "", top);

  if (ds.offload_optimizer_device == "nvme" && !ds.offload_optimizer_nvme_path) {
    check.problem(fmt::format(
        "{}: zero_optimization.offload_optimizer.device is nvme but it has no nvme_path: add the "
        "folder for its swap files",
        source));
  }
  if (ds.offload_param_device == "nvme" && !ds.offload_param_nvme_path) {
    check.problem(fmt::format(
        "{}: zero_optimization.offload_param.device is nvme but it has no nvme_path: add the "
        "folder for its swap files",
        source));
  }
  if (bf16_enabled.value_or(false) && fp16_enabled.value_or(false)) {
    check.problem(
        fmt::format("{}: bf16.enabled and fp16.enabled are both true: enable one of them", source));
  }
  if (!check.problems().empty()) {  // every problem of the file, one line each
    fail("{}", fmt::join(check.problems(), "\n"));
  }
  ds.auto_keys = check.autos();
  if (bf16_enabled.value_or(false)) {
    ds.precision = DType::BF16;
  } else if (fp16_enabled.value_or(false)) {
    ds.precision = DType::F16;
  } else if (bf16_enabled || fp16_enabled) {
    ds.precision = DType::F32;
  }
  return ds;
}

DsConfig load_ds_config(const std::filesystem::path& path, std::vector<std::string>& warnings) {
  std::error_code ec;
  ZL_CHECK(!std::filesystem::is_directory(path, ec),
           "{}: is a directory: give a DeepSpeed JSON file", path.string());
  std::ifstream in(path, std::ios::binary);
  ZL_CHECK(in.good(), "{}: cannot read the config file: {}", path.string(), std::strerror(errno));
  // Read at most one byte past the limit, so /dev/zero or a huge file is refused, not swallowed.
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  ZL_CHECK(!in.bad(), "{}: cannot read the config file: {}", path.string(), std::strerror(errno));
  text.resize(static_cast<std::size_t>(in.gcount()));
  ZL_CHECK(text.size() <= kMaxConfigBytes,
           "{}: the config file is larger than {} MiB: give a DeepSpeed JSON config", path.string(),
           kMaxConfigBytes >> 20);
  return parse_ds_config(text, path.string(), warnings);
}

void apply_ds_config(const DsConfig& ds, TrainConfig& config, std::int64_t& steps_per_print) {
  TrainingFeatures& features = config.features;
  if (ds.micro_batch) config.micro_batch = *ds.micro_batch;
  if (ds.grad_accum_steps) features.grad_accum_steps = *ds.grad_accum_steps;
  if (ds.grad_clip) features.grad_clip = *ds.grad_clip;
  if (ds.steps_per_print) steps_per_print = *ds.steps_per_print;
  if (ds.precision) features.precision = *ds.precision;
  if (ds.initial_scale_power) features.loss_scale.initial_scale_power = *ds.initial_scale_power;
  if (ds.loss_scale_window) features.loss_scale.window = *ds.loss_scale_window;
  if (ds.hysteresis) features.loss_scale.hysteresis = *ds.hysteresis;
  if (ds.min_loss_scale) features.loss_scale.min_scale = *ds.min_loss_scale;
  if (ds.static_loss_scale) features.loss_scale.static_scale = *ds.static_loss_scale;
  if (ds.engine) config.engine = *ds.engine;
  if (ds.overlap_comm) features.overlap_comm = *ds.overlap_comm;
  if (ds.hpz_partition_ranks) features.hpz_partition_ranks = *ds.hpz_partition_ranks;
  if (ds.quantized_weights) features.quantized_weights = *ds.quantized_weights;
  if (ds.quantized_gradients) features.quantized_gradients = *ds.quantized_gradients;
  if (ds.mics_shard_ranks) features.shard_group_ranks = *ds.mics_shard_ranks;
  if (ds.offload_optimizer_device) {
    features.offload_optimizer = *ds.offload_optimizer_device != "none";
    if (*ds.offload_optimizer_device == "nvme") {
      features.nvme_path = *ds.offload_optimizer_nvme_path;
    }
  }
  if (ds.pipeline_read) features.pipeline_read = *ds.pipeline_read;
  if (ds.pipeline_write) features.pipeline_write = *ds.pipeline_write;
  if (ds.swap_buffer_count) features.swap_buffer_count = *ds.swap_buffer_count;
  if (ds.aio_block_bytes) features.aio.block_bytes = *ds.aio_block_bytes;
  if (ds.aio_queue_depth) features.aio.queue_depth = *ds.aio_queue_depth;
  if (ds.aio_thread_count) features.aio.thread_count = *ds.aio_thread_count;
  if (ds.offload_param_device) {
    features.offload_param = *ds.offload_param_device != "none";
    if (*ds.offload_param_device == "nvme") {
      features.param_nvme_path = *ds.offload_param_nvme_path;
      // DeepSpeed's default keeps the first 1e9 elements of shards in host memory
      features.param_max_in_cpu_elems = ds.param_max_in_cpu_elems.value_or(kDsMaxInCpuElems);
    }
  }
  if (ds.param_buffer_count) features.param_buffer_count = *ds.param_buffer_count;
  if (ds.param_buffer_elems) features.param_buffer_elems = *ds.param_buffer_elems;
  if (ds.reduce_bucket_elems) features.reduce_bucket_elems = *ds.reduce_bucket_elems;
  if (ds.allgather_bucket_elems) features.allgather_bucket_elems = *ds.allgather_bucket_elems;
  if (ds.prefetch_bucket_elems) features.prefetch_bucket_elems = *ds.prefetch_bucket_elems;
  if (ds.persistence_threshold_elems) {
    features.persistence_threshold_elems = *ds.persistence_threshold_elems;
  }
  if (ds.adamw) config.adamw = *ds.adamw;
  if (ds.lr_schedule) config.lr_schedule = *ds.lr_schedule;
  if (ds.scheduler_peak_lr) config.adamw.lr = *ds.scheduler_peak_lr;
  if (ds.activations) config.activations = *ds.activations;
}

namespace {

// What an "auto" key resolved to, after the flags: the value and the flag that sets it.
std::string auto_value(std::string_view path, const TrainConfig& config,
                       std::int64_t steps_per_print) {
  const TrainingFeatures& f = config.features;
  const LossScaleConfig& scale = f.loss_scale;
  const LrSchedule& schedule = config.lr_schedule;
  const std::pair<std::string_view, std::string> values[] = {
      {"train_batch_size", fmt::format("micro-batch * accumulation * world = {} (not checked)",
                                       config.micro_batch * f.grad_accum_steps * config.world)},
      {"train_micro_batch_size_per_gpu", fmt::format("{} (--micro-batch)", config.micro_batch)},
      {"gradient_accumulation_steps", fmt::format("{} (--grad-accum)", f.grad_accum_steps)},
      {"gradient_clipping", fmt::format("{} (--clip)", f.grad_clip)},
      {"steps_per_print", fmt::format("{} (--steps-per-print)", steps_per_print)},
      {"bf16.enabled", fmt::format("{} (--bf16)", f.precision == DType::BF16)},
      {"fp16.enabled", fmt::format("{} (--fp16)", f.precision == DType::F16)},
      {"fp16.initial_scale_power",
       fmt::format("{} (--loss-scale-power)", scale.initial_scale_power)},
      {"fp16.loss_scale_window", fmt::format("{} (--loss-scale-window)", scale.window)},
      {"fp16.hysteresis", fmt::format("{} (--hysteresis)", scale.hysteresis)},
      {"fp16.min_loss_scale", fmt::format("{} (--min-loss-scale)", scale.min_scale)},
      {"zero_optimization.stage", fmt::format("{} (--stage)", engine_name(config.engine))},
      {"zero_optimization.reduce_bucket_size",
       fmt::format("{} (--reduce-bucket)", f.reduce_bucket_elems)},
      {"zero_optimization.allgather_bucket_size",
       fmt::format("{} (--allgather-bucket)", f.allgather_bucket_elems)},
      {"zero_optimization.stage3_prefetch_bucket_size",
       fmt::format("{} (--prefetch-bucket)", f.prefetch_bucket_elems)},
      {"zero_optimization.stage3_param_persistence_threshold",
       fmt::format("{} (--persistence-threshold)", f.persistence_threshold_elems)},
      {"zero_optimization.overlap_comm", fmt::format("{} (--overlap-comm)", f.overlap_comm)},
      {"zero_optimization.zero_hpz_partition_size",
       fmt::format("{} (--hpz-partition-size)", std::max(f.hpz_partition_ranks, 1))},
      {"zero_optimization.zero_quantized_weights",
       fmt::format("{} (--zero-quantized-weights)", f.quantized_weights)},
      {"zero_optimization.zero_quantized_gradients",
       fmt::format("{} (--zero-quantized-gradients)", f.quantized_gradients)},
      {"optimizer.params.lr", fmt::format("{} (--lr)", config.adamw.lr)},
      {"optimizer.params.betas",
       fmt::format("[{}, {}] (--beta1, --beta2)", config.adamw.beta1, config.adamw.beta2)},
      {"optimizer.params.eps", fmt::format("{} (--eps)", config.adamw.eps)},
      {"optimizer.params.weight_decay",
       fmt::format("{} (--weight-decay)", config.adamw.weight_decay)},
      {"scheduler.params.warmup_min_lr", fmt::format("{} (--min-lr)", schedule.min_lr)},
      {"scheduler.params.warmup_max_lr", fmt::format("{} (--lr)", config.adamw.lr)},
      {"scheduler.params.warmup_num_steps",
       fmt::format("{} (--warmup-steps)", schedule.warmup_steps)},
      {"scheduler.params.total_num_steps",
       fmt::format("{} (--decay-steps, else --steps)",
                   schedule.total_steps > 0 ? schedule.total_steps : config.steps)},
  };
  for (const auto& [key, value] : values) {
    if (key == path) return value;
  }
  return "zerolab's own value";
}

}  // namespace

std::vector<std::string> auto_resolutions(const DsConfig& ds, const TrainConfig& config,
                                          std::int64_t steps_per_print) {
  std::vector<std::string> lines;
  for (const std::string& path : ds.auto_keys) {
    lines.push_back(fmt::format("{}: {} is \"auto\": {}", ds.source, path,
                                auto_value(path, config, steps_per_print)));
  }
  return lines;
}

void check_train_batch_size(const DsConfig& ds, const TrainConfig& config) {
  if (!ds.train_batch_size) return;
  const std::int64_t accum = config.features.grad_accum_steps;
  std::int64_t product = 0;
  const bool overflow = __builtin_mul_overflow(config.micro_batch, accum, &product) ||
                        __builtin_mul_overflow(product, std::int64_t{config.world}, &product);
  ZL_CHECK(!overflow && product == *ds.train_batch_size,
           "{}: train_batch_size is {} but train_micro_batch_size_per_gpu {} * "
           "gradient_accumulation_steps {} * world {} = {}: make them agree (or set --micro-batch, "
           "--grad-accum, --world)",
           ds.source, *ds.train_batch_size, config.micro_batch, accum, config.world,
           overflow ? std::string("more than 2^63") : fmt::format("{}", product));
}

}  // namespace zl
