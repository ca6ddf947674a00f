// engine.cpp — engine names, stage numbers and the factory of distributed engines.
#include "engines/engine.hpp"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace zl {

NonFiniteError::NonFiniteError(std::int64_t step, double grad_norm)
    : Error(fmt::format("step {}: gradient norm is {}: lower --lr or check the data; "
                        "--skip-nonfinite skips such steps",
                        step + 1, std::isnan(grad_norm) ? "nan" : "inf")),
      step_(step) {}

void validate(const TrainingFeatures& features) {
  ZL_CHECK(is_training_dtype(features.precision),
           "precision {} is invalid: train in fp32, bf16 or fp16", dtype_name(features.precision));
  if (features.precision == DType::F16) validate(features.loss_scale);
  ZL_CHECK(features.nvme_path.empty() || features.offload_optimizer,
           "offload_optimizer.nvme_path {} is set but the optimizer is not offloaded: set "
           "offload_optimizer.device to nvme (--offload-optimizer with --nvme-path)",
           features.nvme_path);
  ZL_CHECK(
      features.param_nvme_path.empty() || (features.offload_param && features.offload_optimizer),
      "offload_param.nvme_path {} is set but the parameters are not offloaded with the "
      "optimizer: set offload_param.device to nvme and offload the optimizer too "
      "(--offload-param --param-nvme-path with --offload-optimizer)",
      features.param_nvme_path);
  validate(features.aio);
  validate_param_buffers(features.param_buffer_count, features.param_buffer_elems,
                         features.param_max_in_cpu_elems);
  const int buffers_needed =
      1 + static_cast<int>(features.pipeline_read) + static_cast<int>(features.pipeline_write);
  ZL_CHECK(features.nvme_path.empty() || features.swap_buffer_count >= buffers_needed,
           "offload_optimizer.buffer_count {} is too small: pipeline_read and pipeline_write "
           "need {} (the updating unit, the one coming in, one going out)",
           features.swap_buffer_count, buffers_needed);
  ZL_CHECK(features.grad_accum_steps >= 1,
           "gradient_accumulation_steps {} is invalid: use 1 or more micro-batches per step",
           features.grad_accum_steps);
  ZL_CHECK(features.grad_clip >= 0.0 && std::isfinite(features.grad_clip),
           "gradient_clipping {} is invalid: use a positive norm, or 0 for no clipping",
           features.grad_clip);
  ZL_CHECK(features.reduce_bucket_elems >= 1,
           "reduce_bucket_size {} is invalid: use 1 or more elements", features.reduce_bucket_elems);
  ZL_CHECK(features.allgather_bucket_elems >= 1,
           "allgather_bucket_size {} is invalid: use 1 or more elements",
           features.allgather_bucket_elems);
  ZL_CHECK(features.prefetch_bucket_elems >= 0,
           "stage3_prefetch_bucket_size {} is invalid: use 0 (no prefetch) or more elements",
           features.prefetch_bucket_elems);
  ZL_CHECK(features.persistence_threshold_elems >= 0,
           "stage3_param_persistence_threshold {} is invalid: use 0 or more elements",
           features.persistence_threshold_elems);
}

void validate_param_buffers(int buffer_count, std::int64_t buffer_elems,
                            std::int64_t max_in_cpu_elems) {
  ZL_CHECK(buffer_count >= 1 && buffer_count <= 1024,
           "offload_param.buffer_count (--param-buffer-count) {} is invalid: use 1 to 1024 swap "
           "buffers",
           buffer_count);
  ZL_CHECK(buffer_elems >= 1,
           "offload_param.buffer_size (--param-buffer-size) {} is invalid: use 1 or more elements",
           buffer_elems);
  ZL_CHECK(max_in_cpu_elems >= 0,
           "offload_param.max_in_cpu (--param-max-in-cpu) {} is invalid: use 0 (every shard on "
           "disk) or more elements",
           max_in_cpu_elems);
}

void validate_shard_group(const TrainingFeatures& features, int world) {
  const int group = features.shard_group_ranks;
  ZL_CHECK(group >= 1 && world % group == 0,
           "a shard group of {} ranks does not divide a world of {}: use --shard-group node with "
           "a --gpus-per-node that divides --world",
           group, world);
}

std::string engine_label(EngineKind kind, const TrainingFeatures& features, int world) {
  const std::string_view name = engine_name(kind);
  const int group = features.shard_group_ranks;
  if (group > 0 && group < world && kind != EngineKind::Reference) {
    return fmt::format("{} {}, shard groups of {}", name,
                       kind == EngineKind::Zero3 ? "hsdp" : "hybrid", group);
  }
  if (kind != EngineKind::Zero3) return std::string(name);
  std::vector<std::string> zeropp;
  if (features.hpz_partition_ranks > 1) {
    zeropp.push_back(fmt::format("hpz, partitions of {}", features.hpz_partition_ranks));
  }
  if (features.quantized_weights) zeropp.emplace_back("qwz (int8 weights)");
  if (features.quantized_gradients) zeropp.emplace_back("qgz (int4 gradients)");
  if (zeropp.empty()) return std::string(name);
  return fmt::format("{} {}", name, fmt::join(zeropp, ", "));
}

bool uses_zeropp(const TrainingFeatures& features) {
  return features.hpz_partition_ranks > 1 || features.quantized_weights ||
         features.quantized_gradients;
}

void validate_zeropp(const TrainingFeatures& features, int world) {
  const int group = std::max(features.hpz_partition_ranks, 1);
  ZL_CHECK(world % group == 0,
           "zero_hpz_partition_size {} does not divide a world of {}: use the GPUs of a node",
           group, world);
  ZL_CHECK(features.shard_group_ranks == 0 || features.shard_group_ranks == world,
           "ZeRO++ (zero_hpz_partition_size, zero_quantized_weights, zero_quantized_gradients) "
           "and --shard-group node both split ZeRO-3: use one of them");
}

std::string_view engine_name(EngineKind kind) {
  switch (kind) {
    case EngineKind::Reference:
      return "reference";
    case EngineKind::Ddp:
      return "ddp";
    case EngineKind::Zero1:
      return "zero1";
    case EngineKind::Zero2:
      return "zero2";
    case EngineKind::Zero3:
      return "zero3";
  }
  fail("unknown engine {}", static_cast<int>(kind));
}

EngineKind engine_of_stage(int stage) {
  switch (stage) {
    case 0:
      return EngineKind::Ddp;
    case 1:
      return EngineKind::Zero1;
    case 2:
      return EngineKind::Zero2;
    case 3:
      return EngineKind::Zero3;
    default:
      break;
  }
  fail("--stage {} is invalid: ZeRO stages are 0 (DDP), 1, 2 and 3", stage);
}

int stage_of(EngineKind kind) {
  switch (kind) {
    case EngineKind::Ddp:
      return 0;
    case EngineKind::Zero1:
      return 1;
    case EngineKind::Zero2:
      return 2;
    case EngineKind::Zero3:
      return 3;
    case EngineKind::Reference:
      break;
  }
  fail("the reference engine has no ZeRO stage");
}

std::unique_ptr<Engine> make_engine(EngineKind kind, Model& model, Device& device, Comm& comm,
                                    const EngineOptions& options) {
  switch (kind) {
    case EngineKind::Ddp:
      return make_ddp_engine(model, device, comm, options);
    case EngineKind::Zero1:
      return make_zero1_engine(model, device, comm, options);
    case EngineKind::Zero2:
      return make_zero2_engine(model, device, comm, options);
    case EngineKind::Zero3: {
      if (uses_zeropp(options.features)) return make_zeropp_engine(model, device, comm, options);
      return make_zero3_engine(model, device, comm, options);
    }
    case EngineKind::Reference:
      break;
  }
  fail("engine {} needs no communicator: use make_reference_engine", engine_name(kind));
}

}  // namespace zl
