// validate.cpp — TrainConfig's checks: every bad setting, or one that needs another backend or
// engine, is refused with a one-line message naming it and what to use instead.
#include <fmt/ranges.h>

#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "core/io_queue.hpp"
#include "engines/estimate.hpp"
#include "ops/cpu/cpu_thread_pool.hpp"
#include "run/launch.hpp"
#include "run/memory_check.hpp"
#include "run/train_config.hpp"

namespace zl {

std::string_view model_name(ModelKind kind) {
  return kind == ModelKind::Gpt ? "gpt" : "mlp";
}

NodeLinks node_links(const TrainConfig& config) {
  return {.gpus_per_node = config.gpus_per_node,
          .across = config.link_across,
          .nics_per_node = config.nics_per_node};
}

bool hybrid_sharded(const TrainConfig& config) {
  const int group = config.features.shard_group_ranks;
  return group > 0 && group < config.world;
}

std::string engine_label(const TrainConfig& config) {
  return engine_label(config.engine, config.features, config.world);
}

std::vector<UnitSpec> model_units(const TrainConfig& config) {
  return config.model == ModelKind::Gpt ? checked_units(config.gpt) : checked_units(config.mlp);
}

int state_shard_ranks(const TrainConfig& config, int world) {
  return hybrid_sharded(config) ? config.features.shard_group_ranks : world;
}

bool splits_into_nodes(const TrainConfig& config) {
  return config.gpus_per_node > 1 && config.gpus_per_node < config.world;
}

int run_threads(const TrainConfig& config) {
  if (config.threads > 0) return config.threads;
  return cpu::cpu_threads_per_rank(config.world);
}

std::string_view backend_name(Backend backend) {
  switch (backend) {
    case Backend::Mpi:
      return "mpi";
    case Backend::Nccl:
      return "nccl";
    default:
      return "sim";
  }
}

void validate(const TrainConfig& config) {
  ZL_CHECK(config.threads >= 0 && config.threads <= 1024,
           "--threads {} is invalid: use a thread count from 1 to 1024 (0: the cores divided among "
           "the ranks)",
           config.threads);
  ZL_CHECK(!config.activations.cpu_checkpoints ||
               config.activations.recompute == Recompute::Full,
           "--cpu-checkpointing keeps full checkpoints in host memory: use it with "
           "--activation-checkpointing full or every:K, not {}",
           activation_policy_name(config.activations));
  if (config.model == ModelKind::Gpt) {
    validate(config.gpt);
  } else {
    validate(config.mlp);
    ZL_CHECK(config.activations.recompute == Recompute::None,
             "--activation-checkpointing {} recomputes GPT blocks, which the MLP has none of: "
             "drop it or use --model gpt",
             activation_policy_name(config.activations));
    ZL_CHECK(config.data.empty(),
             "--data {} needs --model gpt: the MLP trains on its synthetic task",
             config.data);
  }
  validate(config.features);
  ZL_CHECK(config.world >= 1, "--world {} is invalid: use 1 or more ranks", config.world);
  ZL_CHECK(config.backend != Backend::Sim || config.world <= kMaxSimWorld,
           "--world {} is invalid for --backend sim, which runs one thread per rank: use at most "
           "{} (or --backend mpi)",
           config.world, kMaxSimWorld);
  ZL_CHECK(config.gpus_per_node == kOneNode ||
               (config.gpus_per_node >= 1 && config.world % config.gpus_per_node == 0),
           "--gpus-per-node {} does not divide --world {}: give each node the same number of "
           "GPUs, a divisor of the world",
           config.gpus_per_node, config.world);
  ZL_CHECK(!splits_into_nodes(config) || config.backend != Backend::Sim ||
               config.accelerator != Accelerator::Cuda,
           "--gpus-per-node {} with --backend sim needs --accelerator cpu: the simulator's GPU "
           "collectives sum in one level only",
           config.gpus_per_node);
  if (config.features.shard_group_ranks > 0) {
    const int node = ranks_per_node(config.world, config.gpus_per_node);
    ZL_CHECK(config.engine != EngineKind::Ddp,
             "--shard-group node shards ZeRO's states inside a node, and DDP shards none: use "
             "--stage 1, 2 or 3");
    ZL_CHECK(config.features.shard_group_ranks == node,
             "a shard group of {0} ranks (mics_shard_size) is not a node of {1}: hybrid sharding "
             "shards inside one node of --gpus-per-node ranks; give --gpus-per-node {0} or "
             "mics_shard_size {1}",
             config.features.shard_group_ranks, node);
    if (config.engine != EngineKind::Reference) {
      validate_shard_group(config.features, config.world);
    }
  }
  if (config.features.hpz_partition_ranks > 1) {
    ZL_CHECK(config.engine == EngineKind::Zero3 || config.engine == EngineKind::Reference,
             "zero_hpz_partition_size {} partitions ZeRO-3's parameters: use --stage 3",
             config.features.hpz_partition_ranks);
    if (config.engine == EngineKind::Zero3) validate_zeropp(config.features, config.world);
    const int node = ranks_per_node(config.world, config.gpus_per_node);
    ZL_CHECK(node % config.features.hpz_partition_ranks == 0 ||
                 config.features.hpz_partition_ranks % node == 0,
             "zero_hpz_partition_size {} splits nodes of {} ranks unevenly: use a divisor or a "
             "multiple of --gpus-per-node",
             config.features.hpz_partition_ranks, node);
  }
  if (config.features.quantized_weights || config.features.quantized_gradients) {
    const std::string_view key =
        config.features.quantized_weights ? "zero_quantized_weights" : "zero_quantized_gradients";
    ZL_CHECK(config.engine == EngineKind::Zero3,
             "{} quantizes ZeRO-3's communication: use --stage 3 (the reference and the other "
             "stages have none to quantize)",
             key);
    validate_zeropp(config.features, config.world);
  }
  // The groups these split the ranks into (Comm::split, all_to_all): the sim's and mpi's.
  const std::string_view grouped =
      hybrid_sharded(config)                    ? "--shard-group node"
      : config.features.hpz_partition_ranks > 1 ? "zero_hpz_partition_size"
      : config.features.quantized_weights       ? "zero_quantized_weights"
      : config.features.quantized_gradients     ? "zero_quantized_gradients"
                                                : "";
  ZL_CHECK(grouped.empty() || config.backend != Backend::Nccl,
           "{} splits the ranks into groups, which --backend nccl does not build yet: use "
           "--backend sim or mpi, or drop it",
           grouped);
  ZL_CHECK(config.features.grad_accum_steps <= kMaxGradAccumSteps,
           "gradient accumulation of {} micro-batches is invalid: use at most {} per step",
           config.features.grad_accum_steps, kMaxGradAccumSteps);
  ZL_CHECK(config.steps >= 1, "--steps {} is invalid: train at least 1 step", config.steps);
  ZL_CHECK(config.micro_batch >= 1, "--micro-batch {} is invalid: use 1 or more rows per rank",
           config.micro_batch);
  const AdamWConfig& adamw = config.adamw;
  ZL_CHECK(std::isfinite(adamw.lr) && adamw.lr > 0.0,
           "--lr {} is invalid: the learning rate must be a finite number > 0", adamw.lr);
  ZL_CHECK(adamw.beta1 >= 0.0 && adamw.beta1 < 1.0,
           "--beta1 {} is invalid: use a number in [0, 1) (torch.optim.AdamW's range)", adamw.beta1);
  ZL_CHECK(adamw.beta2 >= 0.0 && adamw.beta2 < 1.0,
           "--beta2 {} is invalid: use a number in [0, 1) (torch.optim.AdamW's range)", adamw.beta2);
  ZL_CHECK(std::isfinite(adamw.eps) && adamw.eps >= 0.0,
           "--eps {} is invalid: use a finite number >= 0 (torch.optim.AdamW's range)", adamw.eps);
  ZL_CHECK(std::isfinite(adamw.weight_decay) && adamw.weight_decay >= 0.0,
           "--weight-decay {} is invalid: use a finite number >= 0",
           config.adamw.weight_decay);
  validate(config.lr_schedule);
  ZL_CHECK(config.lr_schedule.min_lr <= adamw.lr,
           "--min-lr {} is invalid: the schedule's floor must not exceed the peak --lr {}",
           config.lr_schedule.min_lr, adamw.lr);
  ZL_CHECK(config.collective_timeout >= kMinCollectiveTimeout,
           "--collective-timeout-ms {} is invalid: use {} or more (a healthy rank waits for its "
           "peers' compute, and on a loaded machine for a core)",
           config.collective_timeout.count(), kMinCollectiveTimeout.count());
  ZL_CHECK(config.faults.empty() || config.engine != EngineKind::Reference,
           "--inject-fault needs a distributed engine (--stage 0-3): the reference makes no "
           "collective calls");
  if (config.backend != Backend::Sim) {
    const std::string_view name = backend_name(config.backend);
#ifndef ZL_HAVE_MPI
    if (config.backend == Backend::Mpi) fail("{}", kNoMpi);
#endif
#ifndef ZL_HAVE_NCCL
    if (config.backend == Backend::Nccl) fail("{}", kNoNccl);
#endif
    ZL_CHECK(config.engine != EngineKind::Reference,
             "--backend {} needs a distributed engine (--stage 0-3): the reference runs in one "
             "process",
             name);
    ZL_CHECK(config.faults.empty(),
             "--inject-fault is the simulator's: use --backend sim (on {} a failing rank aborts "
             "the job)",
             name);
    ZL_CHECK(!config.record_timeline,
             "--trace and --what-if-world need every rank's simulated timeline: use --backend sim");
    ZL_CHECK(!config.engine_factory,
             "an engine factory runs on --backend sim only: its engines live in this process");
    ZL_CHECK(!config.record_data,
             "--save-data needs every rank's samples in one process: use --backend sim (the data "
             "are the same on every backend)");
  }
  ZL_CHECK(config.backend != Backend::Mpi || config.accelerator == Accelerator::Cpu,
           "--backend mpi runs on the CPU: drop --accelerator {} (GPUs use --backend nccl)",
           accelerator_name(config.accelerator));
  ZL_CHECK(config.attention != AttentionKind::Fast || config.accelerator == Accelerator::Cuda,
           "--attention fast runs on GPUs: add --accelerator cuda, or drop --attention (the CPU "
           "runs exact attention)");
  ZL_CHECK(config.backend != Backend::Nccl || config.accelerator == Accelerator::Cuda,
           "--backend nccl runs on GPUs: use --accelerator cuda (the default with nccl)");
  if (config.accelerator != Accelerator::Cpu) {
    ZL_CHECK(config.engine != EngineKind::Reference,
             "--engine reference runs on the CPU: drop --accelerator {}, or train a stage "
             "(--stage 0-3) on it",
             accelerator_name(config.accelerator));
    ZL_CHECK(!config.activations.cpu_checkpoints,
             "--cpu-checkpointing keeps the checkpoints in host memory, which only --accelerator "
             "cpu has for now: drop one of them");
    ZL_CHECK(!config.features.offload_optimizer,
             "--offload-optimizer keeps the optimizer in host memory, which only --accelerator "
             "cpu has: drop one of them");
    ZL_CHECK(!config.features.offload_param,
             "--offload-param keeps the parameter shards in host memory, which only "
             "--accelerator cpu has for now: drop one of them");
  }

  if (!config.features.nvme_path.empty()) {  // validate(features): with offload_optimizer
    std::error_code ec;
    ZL_CHECK(std::filesystem::is_directory(config.features.nvme_path, ec),
             "--nvme-path {} is not a folder: create it, or pass the folder for the swap files",
             config.features.nvme_path);
  }
  if (!config.features.param_nvme_path.empty()) {  // validate(features): with offload_param
    std::error_code ec;
    ZL_CHECK(std::filesystem::is_directory(config.features.param_nvme_path, ec),
             "--param-nvme-path {} is not a folder: create it, or pass the folder for the swap "
             "files",
             config.features.param_nvme_path);
  }
  if (!config.features.nvme_path.empty() || !config.features.param_nvme_path.empty()) {
    check_io_backend(config.features.aio.backend);
  }
  validate_faults(config.faults, config.world, "--inject-fault");
  ZL_CHECK(config.link.busbw_gbps > 0.0 && config.link.alpha_us >= 0.0,
           "link {} is invalid: give a bus bandwidth > 0 GB/s and a latency >= 0 us",
           config.link.name);
  ZL_CHECK(config.link_across.busbw_gbps > 0.0 && config.link_across.alpha_us >= 0.0,
           "link {} is invalid: give a bus bandwidth > 0 GB/s and a latency >= 0 us",
           config.link_across.name);
  ZL_CHECK(config.nics_per_node >= 0, "--nics-per-node {} is invalid: use 1 or more NICs a node",
           config.nics_per_node);
  ZL_CHECK(config.host_link.gbps > 0.0 && config.host_link.latency_us >= 0.0,
           "host link {} is invalid: give a bandwidth > 0 GB/s and a latency >= 0 us",
           config.host_link.name);
  ZL_CHECK(config.disk_link.gbps > 0.0 && config.disk_link.latency_us >= 0.0,
           "disk link {} is invalid: give a bandwidth > 0 GB/s and a latency >= 0 us",
           config.disk_link.name);
}

}  // namespace zl
