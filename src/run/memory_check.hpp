// memory_check.hpp — a run refused before it allocates when this machine cannot hold it: the
// bytes every rank of this process will hold (model states at its stage and one micro-batch's
// activations, as `zerolab estimate` counts them: a lower bound, the transient buffers left out)
// against the host memory the kernel says is available. CPU ranks only: a GPU run's device memory
// is not checked yet.
#pragma once

#include <cstdint>
#include <optional>

#include "run/train_config.hpp"

namespace zl {

/// Most ranks a sim run may have: one thread each in this process.
inline constexpr int kMaxSimWorld = 1024;

/// Most micro-batches one optimizer step may accumulate.
inline constexpr std::int64_t kMaxGradAccumSteps = std::int64_t{1} << 20;

/// The bytes the ranks this process runs hold at least: each rank's model states and activations
/// (estimate_ledger and estimate_activations), times the ranks in this process (W for the sim and
/// the reference's replicas, 1 for an MPI or NCCL process). Throws zl::Error if a count
/// overflows.
std::int64_t planned_process_bytes(const TrainConfig& config);

/// The host memory available now (MemAvailable of /proc/meminfo), or nothing where unknown.
std::optional<std::int64_t> available_host_bytes();

/// Throws zl::Error with both figures and what to change when a CPU run's planned bytes exceed
/// the available host memory; nothing to check for a CUDA run or where the figure is unknown.
void check_memory(const TrainConfig& config);

}  // namespace zl
