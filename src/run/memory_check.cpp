// memory_check.cpp — the estimator's bytes for the run's model, stage and micro-batch, against
// /proc/meminfo's MemAvailable or the GPU's free bytes.
#include "run/memory_check.hpp"

#include <fmt/format.h>

#include <fstream>
#include <sstream>
#include <string>

#include "core/error.hpp"
#include "engines/checked_math.hpp"
#include "engines/estimate.hpp"
#include "engines/estimate_activations.hpp"
#include "run/rank_device.hpp"

namespace zl {
namespace {

constexpr std::string_view kLower = "lower --world, the model or --micro-batch";

double gib(std::int64_t bytes) {
  return static_cast<double>(bytes) / static_cast<double>(std::int64_t{1} << 30);
}

}  // namespace

std::int64_t planned_process_bytes(const TrainConfig& config) {
  const bool gpt = config.model == ModelKind::Gpt;
  const std::vector<UnitSpec> units = model_units(config);
  const EstimateOptions options = estimate_options(config.features);
  const bool reference = config.engine == EngineKind::Reference;
  const int stage = reference ? 0 : stage_of(config.engine);
  // Hybrid sharding shards among a node's ranks: each holds ZeRO-3's states of that world.
  const StateElems elems =
      state_elems(units, reference ? 1 : state_shard_ranks(config, config.world), options);
  const std::int64_t states = estimate_ledger(elems, options, stage).total_bytes();
  const ActivationEstimate activations =
      gpt ? estimate_activations(config.gpt, config.micro_batch, config.gpt.block_size,
                                 config.activations, config.features.precision)
          : estimate_activations(config.mlp, config.micro_batch);
  const std::int64_t activation_bytes = checked_add(activations.total_bytes(),
                                                    activations.host_bytes, kLower);
  if (reference) return checked_add(states, activation_bytes, kLower);
  const std::int64_t per_rank = checked_add(states, activation_bytes, kLower);
  const int ranks_here = config.backend == Backend::Sim ? config.world : 1;
  return checked_mul(per_rank, ranks_here, kLower);
}

std::int64_t final_state_host_bytes(const TrainConfig& config) {
  const StateElems elems = state_elems(model_units(config), 1, estimate_options(config.features));
  return checked_mul(std::int64_t{3 * 4}, elems.replica_elems, kLower);
}

std::optional<std::int64_t> available_host_bytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    std::istringstream fields(line);
    std::string key;
    std::int64_t kib = 0;
    if (fields >> key >> kib && key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

void check_fits(const TrainConfig& config, std::int64_t planned_bytes, std::int64_t available_bytes,
                std::string_view memory, bool final_state) {
  ZL_CHECK(planned_bytes <= available_bytes,
           "this run needs at least {:.2f} GiB of {} ({} model states and one micro-batch's "
           "activations, as zerolab estimate counts them{}) but {:.2f} GiB are available: lower "
           "--world, the model or --micro-batch, or pass --no-memory-check",
           gib(planned_bytes), memory,
           config.backend == Backend::Sim && config.engine != EngineKind::Reference
               ? fmt::format("{} ranks'", config.world)
               : std::string("the rank's"),
           final_state ? ", and the final state's host copy" : "", gib(available_bytes));
}

void check_gpu_memory(const TrainConfig& config, int device_index) {
  const std::optional<std::int64_t> available = free_device_bytes(Accelerator::Cuda, device_index);
  if (!available) return;
  check_fits(config, planned_process_bytes(config), *available,
             fmt::format("GPU {}'s memory", device_index));
}

void check_memory(const TrainConfig& config) {
  if (config.accelerator == Accelerator::Cuda) {
    if (config.backend == Backend::Sim) check_gpu_memory(config, 0);
    return;
  }
  const std::optional<std::int64_t> available = available_host_bytes();
  if (!available) return;
  check_fits(config,
             checked_add(planned_process_bytes(config), final_state_host_bytes(config), kLower),
             *available, "host memory", /*final_state=*/true);
}

}  // namespace zl
