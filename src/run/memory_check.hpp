// memory_check.hpp — a run refused before it allocates when this machine cannot hold it: the
// bytes every rank of this process will hold (model states at its stage and one micro-batch's
// activations, as `zerolab estimate` counts them: a lower bound, the transient buffers left out;
// for the host, also the final state rank 0 assembles) against the memory they come from: the
// host memory the kernel says is available for CPU ranks, the GPU's free memory (cudaMemGetInfo)
// for CUDA ones.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

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

/// The host bytes of the trained model's final state, which rank 0's process assembles after the
/// last step (the fp32 parameters and Adam's two moments, each unit padded as for one rank: an
/// upper bound by under 64 elements a unit). Throws zl::Error if a count overflows.
std::int64_t final_state_host_bytes(const TrainConfig& config);

/// The host memory available now (MemAvailable of /proc/meminfo), or nothing where unknown.
std::optional<std::int64_t> available_host_bytes();

/// Throws zl::Error with both figures and what to change when the planned bytes exceed the
/// memory available: the host's for CPU ranks, GPU 0's for CUDA ranks on the sim (they share
/// it); an nccl process checks its own GPU when it knows which (check_gpu_memory). Nothing to
/// check where the figure is unknown.
void check_memory(const TrainConfig& config);

/// check_memory for this process's ranks on GPU `device_index`: the nccl backend calls it once
/// its bootstrap has named the process's GPU, before the device allocates.
void check_gpu_memory(const TrainConfig& config, int device_index);

/// The refusal itself: throws zl::Error naming both figures, `memory` ("host memory", "GPU 0's
/// memory"), with `final_state` that the plan counts the final state's host copy, and what to
/// change when `planned_bytes` exceed `available_bytes`.
void check_fits(const TrainConfig& config, std::int64_t planned_bytes, std::int64_t available_bytes,
                std::string_view memory, bool final_state = false);

}  // namespace zl
