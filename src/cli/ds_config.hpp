// ds_config.hpp — `zerolab train --config ds.json`: a DeepSpeed JSON config read into the keys
// zerolab honours, then applied to a TrainConfig. Unknown keys are warnings; a wrong type or value
// is a one-line zl::Error naming the key and what to use. docs/configs.md lists every key.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "run/train.hpp"

namespace zl {

/// What a DeepSpeed config sets, key by key; a key the file leaves out stays empty (nullopt), so
/// applying the config changes only what the file names.
struct DsConfig {
  std::string source;  ///< the file's name in messages ("ds.json")

  std::optional<std::int64_t> train_batch_size;  ///< checked, never applied: micro * accum * world
  std::optional<std::int64_t> micro_batch;       ///< train_micro_batch_size_per_gpu
  std::optional<std::int64_t> grad_accum_steps;  ///< gradient_accumulation_steps
  std::optional<double> grad_clip;               ///< gradient_clipping
  std::optional<std::int64_t> steps_per_print;   ///< steps_per_print

  /// BF16 or F16 when bf16.enabled or fp16.enabled is true; F32 when the file has one of them and
  /// neither is true.
  std::optional<DType> precision;
  std::optional<int> initial_scale_power;         ///< fp16.initial_scale_power
  std::optional<std::int64_t> loss_scale_window;  ///< fp16.loss_scale_window
  std::optional<int> hysteresis;                  ///< fp16.hysteresis
  std::optional<double> min_loss_scale;           ///< fp16.min_loss_scale
  std::optional<double> static_loss_scale;        ///< fp16.loss_scale (0: dynamic)

  std::optional<EngineKind> engine;  ///< zero_optimization.stage
  // The rest of zero_optimization.*:
  std::optional<std::int64_t> reduce_bucket_elems;          ///< reduce_bucket_size
  std::optional<std::int64_t> allgather_bucket_elems;       ///< allgather_bucket_size
  std::optional<std::int64_t> prefetch_bucket_elems;        ///< stage3_prefetch_bucket_size
  std::optional<std::int64_t> persistence_threshold_elems;  ///< stage3_param_persistence_threshold
  /// zero_optimization.overlap_comm: reductions (and ZeRO-3's prefetch) as async collectives.
  std::optional<bool> overlap_comm;
  /// zero_optimization.zero_hpz_partition_size: ZeRO++'s secondary partition among this many
  /// ranks (1: off).
  std::optional<int> hpz_partition_ranks;
  /// zero_optimization.zero_quantized_weights: ZeRO++'s qwZ, int8 parameter gathers.
  std::optional<bool> quantized_weights;
  /// zero_optimization.zero_quantized_gradients: ZeRO++'s qgZ, int4 gradient all_to_alls.
  std::optional<bool> quantized_gradients;
  /// zero_optimization.mics_shard_size: MiCS's shard group (-1: off), which zerolab builds as
  /// hybrid sharding inside a node of that many ranks.
  std::optional<int> mics_shard_ranks;
  /// zero_optimization.contiguous_gradients: accepted, no effect (gradients are always one flat
  /// buffer per unit).
  std::optional<bool> contiguous_gradients;
  /// zero_optimization.offload_optimizer.device: "none", "cpu" (ZeRO-Offload) or "nvme"
  /// (ZeRO-Infinity).
  std::optional<std::string> offload_optimizer_device;
  /// zero_optimization.offload_optimizer.nvme_path: the folder of the "nvme" tier's swap files.
  std::optional<std::string> offload_optimizer_nvme_path;
  /// zero_optimization.offload_optimizer.pipeline_read and pipeline_write: stream the NVMe tier.
  std::optional<bool> pipeline_read;
  std::optional<bool> pipeline_write;  ///< see pipeline_read
  /// zero_optimization.offload_optimizer.buffer_count: units in host memory at once, pipelined.
  std::optional<int> swap_buffer_count;
  /// aio.block_size, aio.queue_depth and aio.thread_count: how the swap files move their bytes
  /// (single_submit and overlap_events are read and have no effect).
  std::optional<std::int64_t> aio_block_bytes;
  std::optional<int> aio_queue_depth;   ///< see aio_block_bytes
  std::optional<int> aio_thread_count;  ///< see aio_block_bytes
  /// zero_optimization.offload_param.device (or cpu_offload_params): "none", "cpu" or "nvme"
  /// (ZeRO-Infinity).
  std::optional<std::string> offload_param_device;
  /// zero_optimization.offload_param.nvme_path: the folder of the "nvme" tier's swap files.
  std::optional<std::string> offload_param_nvme_path;
  /// zero_optimization.offload_param.buffer_count, buffer_size and max_in_cpu: the parameters'
  /// swap buffers and the shards kept in host memory (DeepSpeed's defaults 5, 1e8 and 1e9).
  std::optional<int> param_buffer_count;
  std::optional<std::int64_t> param_buffer_elems;      ///< see param_buffer_count
  std::optional<std::int64_t> param_max_in_cpu_elems;  ///< see param_buffer_count

  /// activation_checkpointing: the section checkpoints every GPT block (full), as a DeepSpeed
  /// model that calls deepspeed.checkpointing per block does, in host memory with
  /// cpu_checkpointing; --activation-checkpointing overrides the policy.
  std::optional<ActivationPolicy> activations;

  /// optimizer.{type, params}: AdamW (or Adam or DeepSpeed_Adam, any case, with adam_w_mode).
  /// When the file has an optimizer, every field is set, the ones its params leave out to
  /// DeepSpeed's defaults (weight_decay 0).
  std::optional<AdamWConfig> adamw;

  /// scheduler.{type, params}: the learning-rate schedule (cli/ds_scheduler.hpp).
  std::optional<LrSchedule> lr_schedule;
  /// scheduler.params.warmup_max_lr or cycle_max_lr: the schedule's peak, which replaces the
  /// optimizer's lr (as DeepSpeed's scheduler overwrites the optimizer's).
  std::optional<double> scheduler_peak_lr;

  /// The keys whose value was "auto" (transformers' convention): each keeps the run's own value
  /// (its flag or zerolab's default), said once by auto_resolutions().
  std::vector<std::string> auto_keys;
};

/// Reads the DeepSpeed JSON `text`; `source` names it in messages. Each unknown key appends
/// "<source>: unknown key <path> ignored" to `warnings`. Throws zl::Error (one line) for malformed
/// JSON ("<source>: line L, column C: not valid JSON: ..."), a wrong type or value, both bf16 and
/// fp16 enabled, a static loss scale, an optimizer other than AdamW, or offload to cpu.
DsConfig parse_ds_config(std::string_view text, std::string_view source,
                         std::vector<std::string>& warnings);

/// Reads the file at `path` with parse_ds_config (its path as the source); throws zl::Error naming
/// the path when it cannot be read.
DsConfig load_ds_config(const std::filesystem::path& path, std::vector<std::string>& warnings);

/// Writes every key `ds` sets into `config` and `steps_per_print`; leaves the rest alone.
void apply_ds_config(const DsConfig& ds, TrainConfig& config, std::int64_t& steps_per_print);

/// One line per "auto" key of `ds`: what it resolved to once the flags are applied (`config`),
/// with the flag that sets it, e.g. "ds.json: optimizer.params.lr is "auto": 0.001 (--lr)".
std::vector<std::string> auto_resolutions(const DsConfig& ds, const TrainConfig& config,
                                          std::int64_t steps_per_print);

/// DeepSpeed's rule, checked once the flags are applied too: train_batch_size, when the file sets
/// it, equals micro_batch * grad_accum_steps * world. Throws zl::Error showing the product.
void check_train_batch_size(const DsConfig& ds, const TrainConfig& config);

}  // namespace zl
