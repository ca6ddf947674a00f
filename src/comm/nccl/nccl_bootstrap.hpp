// nccl_bootstrap.hpp — how the ranks of an NCCL run find each other: who they are (torchrun's
// RANK, WORLD_SIZE, LOCAL_RANK, or MPI under mpirun) and how rank 0's ncclUniqueId reaches the
// others (a shared file, a TCP socket at MASTER_ADDR, or MPI_Bcast). On the way every rank's
// payload (its run fingerprint) reaches rank 0, and rank 0's settlement of them all (the run id,
// or why the ranks disagree) comes back with the id: out of band, before any NCCL call.
#pragma once

#include <nccl.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace zl {

/// One process's place in an NCCL run.
struct NcclRankInfo {
  int rank = 0;        ///< this process's rank in [0, world)
  int world = 1;       ///< number of processes, one per GPU
  int local_rank = 0;  ///< rank among the processes of this node: the CUDA device it uses
};

/// What the ranks settle while they bootstrap, over the bootstrap's own channel: each rank's
/// `payload` reaches rank 0, whose `settle` turns all of them (index = rank) into one text that
/// every rank receives with the id. Without `settle` the settled text is empty.
struct BootstrapAgreement {
  std::string payload;  ///< this rank's part, e.g. its encoded run fingerprint
  /// Rank 0's decision over every rank's payload; called on rank 0 only.
  std::function<std::string(const std::vector<std::string>& payloads)> settle;
};

/// The group's id and rank 0's settlement, as every rank receives them.
struct SettledId {
  ncclUniqueId id{};    ///< the same on every rank
  std::string settled;  ///< BootstrapAgreement::settle's text, the same on every rank
};

/// Reads RANK, WORLD_SIZE and LOCAL_RANK as torchrun sets them. Throws zl::Error naming the
/// variable that is missing or not an integer in range (0 <= RANK < WORLD_SIZE, LOCAL_RANK >= 0).
NcclRankInfo nccl_rank_from_env();

/// How long a rank waits for rank 0's id (ZL_NCCL_TIMEOUT_S, whole seconds, default 120).
/// Throws zl::Error naming the variable when it is set to anything but a positive integer.
std::chrono::seconds nccl_bootstrap_timeout();

/// Every other rank writes its payload to `path`.rank-<r> atomically; rank 0 waits for them all
/// (until `timeout`), removes them, creates the id and writes its 128 bytes and the settled text to
/// `path` atomically (a temporary, then a rename); the other ranks poll for that file until
/// `timeout`. Rank 0 removes `path` once the NCCL communicator exists (every rank has read it by
/// then): see NcclComm. Throws zl::Error on timeout naming the path and what to check.
SettledId nccl_unique_id_from_file(const NcclRankInfo& info, const std::filesystem::path& path,
                                   std::chrono::seconds timeout,
                                   const BootstrapAgreement& agreement = {});

/// Rank 0 listens on `port` (every interface) until the other world - 1 ranks, which connect to
/// `host`:`port` retrying until `timeout`, have sent their payloads; then it creates the id and
/// sends it with the settled text to each. Throws zl::Error naming the address on failure.
SettledId nccl_unique_id_over_tcp(const NcclRankInfo& info, const std::string& host, int port,
                                  std::chrono::seconds timeout,
                                  const BootstrapAgreement& agreement = {});

/// Everything an NcclComm needs to join its group.
struct NcclBootstrap {
  NcclRankInfo rank;    ///< who this process is
  ncclUniqueId id{};    ///< the group's id, the same on every rank
  std::string settled;  ///< rank 0's settlement of the ranks' payloads (BootstrapAgreement)
  /// The id file rank 0 wrote, to remove once the communicator exists (every rank has read it
  /// by then, so a later run never reads a stale id); empty on other ranks and other bootstraps.
  std::filesystem::path id_file_to_remove;
};

/// Bootstrap from the environment, as torchrun (or a job script) sets it: nccl_rank_from_env(),
/// then the id through ZL_NCCL_ID_FILE when set (simplest: any fresh path every rank sees), else
/// through MASTER_ADDR and MASTER_PORT (served on MASTER_PORT + 1: under torchrun MASTER_PORT
/// itself is held by torchrun's own store). Throws zl::Error naming the variables when neither
/// is set, or a port is not a number in 1..65534. `agreement` is settled on the way.
NcclBootstrap nccl_bootstrap_from_env(const BootstrapAgreement& agreement = {});

/// A group of one: this process is rank 0 of 1 on GPU 0, with a fresh id (a single process
/// started without a launcher); `agreement` is settled over its own payload.
NcclBootstrap nccl_bootstrap_single(const BootstrapAgreement& agreement = {});

/// `agreement.settle` over `payloads` (index = rank), or "" without a settle function.
std::string settle_payloads(const BootstrapAgreement& agreement,
                            const std::vector<std::string>& payloads);

}  // namespace zl
