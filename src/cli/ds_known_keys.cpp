// ds_known_keys.cpp — the table of DeepSpeed keys zerolab knows (from DeepSpeed's config docs and
// deepspeed/runtime/config.py, zero/config.py, zero/offload_config.py), and the nearest-key search
// for misspelt ones.
#include "cli/ds_known_keys.hpp"

#include <algorithm>
#include <array>
#include <numeric>

namespace zl::ds {
namespace {

constexpr std::string_view kLogging =
    "zerolab prints each step and writes --metrics JSON lines; the ledgers count memory and traffic";
constexpr std::string_view kMemoryTuning =
    "zerolab holds memory by its own rules (each unit gathered and released as it runs, buckets "
    "from --reduce-bucket and --prefetch-bucket); no effect";

// Every key zerolab does not implement. The paths of the keys it reads are in ds_config.cpp's
// readers; those also count as known for suggestions (kImplemented).
constexpr std::array kKnown = {
    KnownKey{"wall_clock_breakdown", kLogging, false, ""},
    KnownKey{"memory_breakdown", kLogging, false, ""},
    KnownKey{"flops_profiler", "zerolab bench step and the device line's MFU", false, ""},
    KnownKey{"tensorboard", kLogging, false, ""},
    KnownKey{"wandb", kLogging, false, ""},
    KnownKey{"csv_monitor", kLogging, false, ""},
    KnownKey{"comet", kLogging, false, ""},
    KnownKey{"comms_logger", "the traffic ledger counts every collective", false, ""},
    KnownKey{"dump_state", kLogging, false, ""},
    KnownKey{"zero_allow_untested_optimizer", "zerolab trains AdamW only", false, ""},
    KnownKey{"zero_force_ds_cpu_optimizer", "ZeRO-Offload always updates on the host", false, ""},
    KnownKey{"checkpoint", "zerolab's checkpoints are --checkpoint-dir's, resharded at load", false,
             ""},
    KnownKey{"elasticity", "a resume may use any world (--resume)", true, "{\"enabled\": false}"},
    KnownKey{"autotuning", "zerolab runs the config as given", false, ""},
    KnownKey{"aio.use_gds", "swap files go through host memory", true, "false"},
    KnownKey{"nebula", "zerolab's checkpoints are --checkpoint-dir's", false, ""},
    KnownKey{"compile", "zerolab's kernels are compiled ahead of time", false, ""},
    KnownKey{"pipeline", "zerolab has no pipeline parallelism", false, ""},
    KnownKey{"amp", "use bf16 or fp16 (mixed precision with an fp32 master)", true,
             "{\"enabled\": false}"},
    KnownKey{"torch_autocast", "use bf16 or fp16 (mixed precision with an fp32 master)", true,
             "{\"enabled\": false}"},
    KnownKey{"prescale_gradients", "gradients are summed, then divided by the world once", true,
             "false"},
    KnownKey{"gradient_predivide_factor", "gradients are summed, then divided by the world once",
             true, "1.0"},
    KnownKey{"sparse_gradients", "gradients are dense", true, "false"},
    KnownKey{"communication_data_type", "collectives run in the training precision", true, "null"},
    KnownKey{"seq_parallel_communication_data_type", "zerolab has no sequence parallelism", false,
             ""},
    KnownKey{"data_types", "gradients accumulate in the training precision", true, "{}"},
    KnownKey{"data_efficiency", "zerolab samples windows by seed and step", true,
             "{\"enabled\": false}"},
    KnownKey{"curriculum_learning", "zerolab samples windows by seed and step", true,
             "{\"enabled\": false}"},
    KnownKey{"compression_training", "zerolab trains uncompressed", true, "{}"},
    KnownKey{"fp16.auto_cast", "inputs are cast by the model's own rules", true, "false"},
    KnownKey{"fp16.consecutive_hysteresis", "the hysteresis budget refills only on growth", true,
             "false"},
    KnownKey{"fp16.fp16_master_weights_and_grads", "the master weights are fp32", true, "false"},
    KnownKey{"bf16.immediate_grad_update", "gradients are applied at the step", false, ""},
    KnownKey{"zero_optimization.round_robin_gradients", kMemoryTuning, false, ""},
    KnownKey{"zero_optimization.sub_group_size", "the optimizer steps unit by unit", false, ""},
    KnownKey{"zero_optimization.stage3_max_live_parameters", kMemoryTuning, false, ""},
    KnownKey{"zero_optimization.stage3_max_reuse_distance", kMemoryTuning, false, ""},
    KnownKey{"zero_optimization.stage3_gather_16bit_weights_on_model_save",
             "zerolab consolidate writes the full fp32 weights", false, ""},
    KnownKey{"zero_optimization.stage3_gather_fp16_weights_on_model_save",
             "zerolab consolidate writes the full fp32 weights", false, ""},
    KnownKey{"zero_optimization.stage3_module_granularity_threshold", kMemoryTuning, false, ""},
    KnownKey{"zero_optimization.reduce_scatter",
             "ZeRO-1/2/3 reduce-scatter the gradients (DDP all-reduces them)", true, "true"},
    KnownKey{"zero_optimization.allgather_partitions", "parameters are all-gathered", true, "true"},
    KnownKey{"zero_optimization.load_from_fp32_weights", "checkpoints hold the fp32 master", true,
             "true"},
    KnownKey{"zero_optimization.elastic_checkpoint", "checkpoints reshard to any world", false, ""},
    KnownKey{"zero_optimization.ignore_unused_parameters", "every parameter has a gradient", false,
             ""},
    KnownKey{"zero_optimization.legacy_stage1", "ZeRO-1 is the textbook stage", true, "false"},
    KnownKey{"zero_optimization.zero_quantized_nontrainable_weights",
             "every parameter trains: zero_quantized_weights quantizes their gathers", true,
             "false"},
    KnownKey{"zero_optimization.mics_hierarchical_params_gather",
             "MiCS's shard group is one node, whose gathers are one level", false, ""},
    KnownKey{"zero_optimization.memory_efficient_linear", kMemoryTuning, false, ""},
    KnownKey{"zero_optimization.pipeline_loading_checkpoint", kMemoryTuning, false, ""},
    KnownKey{"zero_optimization.override_module_apply", kMemoryTuning, false, ""},
    KnownKey{"zero_optimization.log_trace_cache_warnings", kLogging, false, ""},
    KnownKey{"zero_optimization.use_multi_rank_bucket_allreduce", kMemoryTuning, false, ""},
    KnownKey{"zero_optimization.use_all_reduce_for_fetch_params", kMemoryTuning, false, ""},
    KnownKey{"zero_optimization.cpu_offload_use_pin_memory", "host memory is not pinned", false,
             ""},
    KnownKey{"zero_optimization.offload_optimizer.pin_memory", "host memory is not pinned", false,
             ""},
    KnownKey{"zero_optimization.offload_optimizer.fast_init", kMemoryTuning, false, ""},
    KnownKey{"zero_optimization.offload_optimizer.pipeline", kMemoryTuning, false, ""},
    KnownKey{"zero_optimization.offload_optimizer.ratio",
             "the whole shard's update runs on the host", true, "1.0"},
    KnownKey{"zero_optimization.offload_param.pin_memory", "host memory is not pinned", false, ""},
    KnownKey{"optimizer.params.torch_adam", "zerolab's fused AdamW is bitwise torch's", false, ""},
    KnownKey{"optimizer.params.amsgrad", "AdamW without amsgrad", true, "false"},
    KnownKey{"optimizer.params.bias_correction", "AdamW with bias correction", true, "true"},
    KnownKey{"optimizer.params.max_grad_norm", "use gradient_clipping", true, "0"},
    KnownKey{"scheduler.params.last_batch_iteration",
             "a resumed run continues the schedule from "
             "its checkpoint",
             true, "-1"},
};

// The keys zerolab reads (ds_config.cpp, ds_scheduler.cpp), for suggestions only.
constexpr auto kImplemented = std::to_array<std::string_view>({
    "train_batch_size",
    "train_micro_batch_size_per_gpu",
    "gradient_accumulation_steps",
    "gradient_clipping",
    "steps_per_print",
    "bf16",
    "fp16",
    "zero_optimization",
    "optimizer",
    "scheduler",
    "activation_checkpointing",
    "bf16.enabled",
    "fp16.enabled",
    "fp16.loss_scale",
    "fp16.initial_scale_power",
    "fp16.loss_scale_window",
    "fp16.hysteresis",
    "fp16.min_loss_scale",
    "zero_optimization.stage",
    "zero_optimization.reduce_bucket_size",
    "zero_optimization.allgather_bucket_size",
    "zero_optimization.stage3_prefetch_bucket_size",
    "zero_optimization.stage3_param_persistence_threshold",
    "zero_optimization.overlap_comm",
    "zero_optimization.contiguous_gradients",
    "zero_optimization.offload_optimizer",
    "zero_optimization.offload_param",
    "zero_optimization.cpu_offload",
    "zero_optimization.cpu_offload_params",
    "zero_optimization.offload_optimizer.device",
    "zero_optimization.offload_optimizer.nvme_path",
    "zero_optimization.offload_param.device",
    "zero_optimization.offload_param.nvme_path",
    "zero_optimization.offload_optimizer.pipeline_read",
    "zero_optimization.offload_optimizer.pipeline_write",
    "zero_optimization.offload_optimizer.buffer_count",
    "zero_optimization.offload_param.buffer_count",
    "zero_optimization.offload_param.buffer_size",
    "zero_optimization.offload_param.max_in_cpu",
    "aio",
    "aio.block_size",
    "aio.queue_depth",
    "aio.thread_count",
    "aio.single_submit",
    "aio.overlap_events",
    "bfloat16",
    "optimizer.type",
    "optimizer.params",
    "optimizer.params.lr",
    "optimizer.params.betas",
    "optimizer.params.eps",
    "optimizer.params.weight_decay",
    "optimizer.params.adam_w_mode",
    "scheduler.type",
    "scheduler.params",
    "scheduler.params.warmup_min_lr",
    "scheduler.params.warmup_max_lr",
    "scheduler.params.warmup_num_steps",
    "scheduler.params.warmup_type",
    "scheduler.params.total_num_steps",
    "scheduler.params.cos_min_ratio",
    "scheduler.params.warmup_min_ratio",
    "scheduler.params.cycle_min_lr",
    "scheduler.params.cycle_max_lr",
    "activation_checkpointing.partition_activations",
    "activation_checkpointing.cpu_checkpointing",
    "activation_checkpointing.number_checkpoints",
    "activation_checkpointing.profile",
});

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  std::iota(row.begin(), row.end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

// "a.b.c" -> parent "a.b" and name "c".
std::pair<std::string_view, std::string_view> split(std::string_view path) {
  const std::size_t dot = path.rfind('.');
  if (dot == std::string_view::npos) return {"", path};
  return {path.substr(0, dot), path.substr(dot + 1)};
}

}  // namespace

const KnownKey* known_key(std::string_view path) {
  const auto found = std::ranges::find(kKnown, path, &KnownKey::path);
  return found == kKnown.end() ? nullptr : &*found;
}

bool harmless_value(const KnownKey& key, const json& value) {
  if (!key.changes_results) return true;
  const json harmless = json::parse(key.harmless);
  if (value == harmless) return true;
  if (value.is_number() && harmless.is_number()) return value.get<double>() == harmless.get<double>();
  if (value.is_object() && value.contains("enabled") && value["enabled"] == false) return true;
  return value.is_object() && value.empty() && harmless.is_object();
}

std::vector<std::string> known_keys_under(std::string_view parent) {
  std::vector<std::string> names;
  const auto add = [&](std::string_view path) {
    const auto [key_parent, name] = split(path);
    if (key_parent == parent) names.emplace_back(name);
  };
  for (const KnownKey& key : kKnown) add(key.path);
  for (const std::string_view path : kImplemented) add(path);
  return names;
}

std::string nearest_key(std::string_view key, const std::vector<std::string>& candidates) {
  std::string best;
  std::size_t best_distance = std::max<std::size_t>(1, key.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    if (candidate == key) continue;
    const std::size_t distance = edit_distance(key, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace zl::ds
