// estimate_command.hpp — `zerolab estimate`: per-GPU model-state memory of DDP and ZeRO-1/2/3 for
// a parameter count or a model (MLP or GPT-2) in fp32, bf16 or fp16, with gradient accumulation and
// ZeRO-3 persistence, and with --micro-batch the model's activations, as a table with the formulas
// or as JSON.
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "engines/estimate.hpp"
#include "engines/estimate_activations.hpp"
#include "engines/estimate_traffic.hpp"
#include "model/gpt_config.hpp"
#include "model/mlp.hpp"

namespace zl {

/// Flags of `zerolab estimate` after parsing; checked when the estimate is made.
struct EstimateFlags {
  std::string params;  ///< Ψ as an integer or a whole number like 7e9; empty if not given
  std::string model;   ///< "mlp" or "gpt"; empty if not given
  MlpConfig mlp;       ///< the shape when model is "mlp"
  std::string preset;  ///< GPT preset name; empty if not given
  GptConfig gpt;       ///< the shape when model is "gpt": the preset's, then the size flags
  bool mlp_sizes_given = false;    ///< any of --layers, --width, --in, --classes
  bool gpt_sizes_given = false;    ///< any of --preset, --n-layer, --n-head, --n-embd, ...
  int world = 1;                   ///< N
  std::string precision = "bf16";  ///< fp32, bf16 or fp16 (--dtype mixed means bf16)
  /// --grad-accum: above 1, DDP books a full gradient accumulator and ZeRO-1 a shard of one.
  std::int64_t grad_accum_steps = 1;
  /// --persistence-threshold: ZeRO-3 units below this many elements stay whole on every rank.
  std::int64_t persistence_threshold_elems = EstimateOptions{}.persistence_threshold_elems;
  /// True when --persistence-threshold was given; it needs --model (units), not --params.
  bool persistence_threshold_given = false;
  int optimizer_bytes = EstimateOptions{}.optimizer_bytes_per_param;  ///< beside the master
  /// --micro-batch: rows (MLP) or sequences of block_size tokens (GPT) per rank; not given: no
  /// activation term.
  std::optional<std::int64_t> micro_batch;
  /// --activation-checkpointing: what the GPT's blocks keep (with --micro-batch).
  ActivationPolicy activations;
  /// --offload-optimizer: where the master and optimizer state rest (none, cpu or nvme).
  std::string offload_optimizer = "none";
  /// --offload-param: where ZeRO-3's parameter shards rest (none or cpu).
  std::string offload_param = "none";
  /// --param-buffer-count, --param-buffer-size, --param-max-in-cpu: with --offload-param nvme,
  /// the parameters' swap buffers in host memory and the shards kept there, as train takes them.
  int param_buffer_count = TrainingFeatures{}.param_buffer_count;
  std::int64_t param_buffer_elems = TrainingFeatures{}.param_buffer_elems;          ///< see above
  std::int64_t param_max_in_cpu_elems = TrainingFeatures{}.param_max_in_cpu_elems;  ///< see above
  /// --hpz-partition-size: ZeRO++'s hpZ at stage 3, a secondary parameter shard among this many
  /// GPUs (1: off).
  int hpz_partition_ranks = 1;
  /// --gpus-per-node: GPUs a node, for the traffic by link level (0: every GPU on one node).
  int gpus_per_node = 0;
  /// --shard-group node: stages 1-3 shard inside each node of --gpus-per-node GPUs (hybrid
  /// sharding, HSDP at stage 3) and the nodes hold replicas.
  bool shard_group_node = false;
  /// --zero-quantized-weights: ZeRO++'s qwZ at stage 3 (int8 parameter gathers).
  bool quantized_weights = false;
  /// --zero-quantized-gradients: ZeRO++'s qgZ at stage 3 (int4 all_to_all gradient reduce).
  bool quantized_gradients = false;
  /// --device-gb: one GPU's device budget for the memory wall (with the other two, or none).
  std::optional<double> device_gb;
  /// --host-gb: the host memory one GPU's rank may use, for the memory wall.
  std::optional<double> host_gb;
  /// --disk-gb: the disk one GPU's rank may use, for the memory wall.
  std::optional<double> disk_gb;
  bool json = false;  ///< print JSON instead of the table
};

/// Adds the `estimate` subcommand to `app`; `run` is set to the function that prints the
/// estimate. Bad flags throw during parsing (CLI::ParseError or zl::Error: one line, exit 2).
CLI::App* add_estimate_command(CLI::App& app, std::function<int()>& run);

}  // namespace zl
