// launch.hpp — how the ranks of a run are started on each backend and how their reports reach the
// caller: the simulator's W threads in this process, or this process's one rank of an MPI or NCCL
// job (whose reports travel to rank 0's process). Every backend runs the same run_rank().
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "run/rank_loop.hpp"
#include "run/run_plan.hpp"
#include "run/train.hpp"

namespace zl {

/// The error for --backend mpi in a zerolab built without MPI.
inline constexpr std::string_view kNoMpi =
    "--backend mpi: this zerolab was built without MPI: install libopenmpi-dev openmpi-bin "
    "(scripts/setup.sh) and rebuild, or use --backend sim";

/// The error for --backend nccl in a zerolab built without CUDA and NCCL.
inline constexpr std::string_view kNoNccl =
    "--backend nccl: this zerolab was built without CUDA and NCCL: install the CUDA toolkit with "
    "NCCL and rebuild, or use --backend sim";

/// Runs `plan`'s W ranks as the simulator's threads (each on its own device of
/// config.accelerator) and fills `result` with rank 0's state and every rank's ledgers and
/// timeline. Throws rank 0's NonFiniteError message, or the simulator's error naming a failed rank.
void launch_on_sim(const RunPlan& plan, const RankCallbacks& callbacks, TrainResult& result);

/// Runs this process's rank of an `mpirun` job on an MpiComm and the CPU; on rank 0's process
/// fills `result` with every rank's ledgers and step times, elsewhere leaves it without results.
/// A rank that fails aborts the job with its message. Before the first step the processes compare
/// their run fingerprints (run_fingerprint.hpp) and take rank 0's plan.run_id, both out of band.
/// Throws zl::Error without MPI.
void launch_on_mpi(RunPlan& plan, const RankCallbacks& callbacks, TrainResult& result);

/// Runs this process's rank on its GPU (LOCAL_RANK) through an NcclComm; results, the fingerprint
/// comparison and rank 0's plan.run_id as launch_on_mpi, exchanged over the NCCL bootstrap's own
/// channel. Throws zl::Error without NCCL.
void launch_on_nccl(RunPlan& plan, const RankCallbacks& callbacks, TrainResult& result);

/// Every rank's `bytes` at least on rank 0, in rank order. Collective.
using GatherBytes = std::function<std::vector<std::string>(const std::string& bytes)>;

/// The end of a run with one rank per process (mpi, nccl): a non-finite stop is rank 0's error;
/// otherwise every rank's ledgers and step times reach rank 0 through `gather`, and rank 0's
/// `result` is completed; other ranks' `result` is emptied and marked has_results = false.
void finish_process_run(TrainResult& result, RankRun& run, bool is_rank0,
                        const GatherBytes& gather);

/// True under mpirun (OpenMPI sets OMPI_COMM_WORLD_SIZE).
bool under_mpirun();

}  // namespace zl
