// nccl_bootstrap.hpp — how the ranks of an NCCL run find each other: who they are (torchrun's
// RANK, WORLD_SIZE, LOCAL_RANK, or MPI under mpirun) and how rank 0's ncclUniqueId reaches the
// others (a shared file, a TCP socket at MASTER_ADDR, or MPI_Bcast).
#pragma once

#include <nccl.h>

#include <chrono>
#include <filesystem>
#include <string>

namespace zl {

/// One process's place in an NCCL run.
struct NcclRankInfo {
  int rank = 0;        ///< this process's rank in [0, world)
  int world = 1;       ///< number of processes, one per GPU
  int local_rank = 0;  ///< rank among the processes of this node: the CUDA device it uses
};

/// Reads RANK, WORLD_SIZE and LOCAL_RANK as torchrun sets them. Throws zl::Error naming the
/// variable that is missing or not an integer in range (0 <= RANK < WORLD_SIZE, LOCAL_RANK >= 0).
NcclRankInfo nccl_rank_from_env();

/// How long a rank waits for rank 0's id (ZL_NCCL_TIMEOUT_S, whole seconds, default 120).
/// Throws zl::Error naming the variable when it is set to anything but a positive integer.
std::chrono::seconds nccl_bootstrap_timeout();

/// Rank 0 creates the id and writes its 128 bytes to `path` atomically (a temporary, then a
/// rename); the other ranks poll for the file until `timeout`. Rank 0 removes the file once the
/// NCCL communicator exists (every rank has read it by then): see NcclComm. Throws zl::Error on
/// timeout naming the path and what to check.
ncclUniqueId nccl_unique_id_from_file(const NcclRankInfo& info, const std::filesystem::path& path,
                                      std::chrono::seconds timeout);

/// Rank 0 creates the id and serves it over TCP on `port` (every interface) to the other
/// world - 1 ranks, which connect to `host`:`port`, retrying until `timeout`. Throws zl::Error
/// naming the address on failure.
ncclUniqueId nccl_unique_id_over_tcp(const NcclRankInfo& info, const std::string& host, int port,
                                     std::chrono::seconds timeout);

/// Everything an NcclComm needs to join its group.
struct NcclBootstrap {
  NcclRankInfo rank;  ///< who this process is
  ncclUniqueId id{};  ///< the group's id, the same on every rank
  /// The id file rank 0 wrote, to remove once the communicator exists (every rank has read it
  /// by then, so a later run never reads a stale id); empty on other ranks and other bootstraps.
  std::filesystem::path id_file_to_remove;
};

/// Bootstrap from the environment, as torchrun (or a job script) sets it: nccl_rank_from_env(),
/// then the id through ZL_NCCL_ID_FILE when set (simplest: any fresh path every rank sees), else
/// through MASTER_ADDR and MASTER_PORT (served on MASTER_PORT + 1: under torchrun MASTER_PORT
/// itself is held by torchrun's own store). Throws zl::Error naming the variables when neither
/// is set, or a port is not a number in 1..65534.
NcclBootstrap nccl_bootstrap_from_env();

/// A group of one: this process is rank 0 of 1 on GPU 0, with a fresh id (a single process
/// started without a launcher).
NcclBootstrap nccl_bootstrap_single();

}  // namespace zl
