// nccl_mpi_bootstrap.cpp — ranks from MPI, the payloads by MPI_Gatherv, the NCCL id and rank 0's
// settlement by MPI_Bcast.
#include "comm/nccl/nccl_mpi_bootstrap.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "comm/nccl/nccl_library.hpp"
#include "core/error.hpp"

namespace zl {

namespace {

void mpi_check(int status, const char* call) {
  ZL_CHECK(status == MPI_SUCCESS, "MPI call {} failed with code {}", call, status);
}

// Every rank's `payload` on rank 0 (index = rank); empty elsewhere.
std::vector<std::string> gather_payloads(const std::string& payload, int rank, int world,
                                         MPI_Comm comm) {
  auto size = static_cast<std::int64_t>(payload.size());
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(world));
  mpi_check(MPI_Gather(&size, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, 0, comm), "MPI_Gather");
  std::vector<int> counts(static_cast<std::size_t>(world)),
      offsets(static_cast<std::size_t>(world));
  int total = 0;
  for (std::size_t r = 0; r < sizes.size(); ++r) {
    counts[r] = static_cast<int>(sizes[r]);
    offsets[r] = total;
    total += counts[r];
  }
  std::string all(static_cast<std::size_t>(rank == 0 ? total : 0), '\0');
  mpi_check(MPI_Gatherv(payload.data(), static_cast<int>(payload.size()), MPI_BYTE, all.data(),
                        counts.data(), offsets.data(), MPI_BYTE, 0, comm),
            "MPI_Gatherv");
  std::vector<std::string> payloads;
  if (rank != 0) return payloads;
  for (std::size_t r = 0; r < counts.size(); ++r) {
    payloads.push_back(
        all.substr(static_cast<std::size_t>(offsets[r]), static_cast<std::size_t>(counts[r])));
  }
  return payloads;
}

// Rank 0's `text` on every rank.
std::string broadcast_text(std::string text, MPI_Comm comm) {
  auto size = static_cast<std::int64_t>(text.size());
  mpi_check(MPI_Bcast(&size, 1, MPI_INT64_T, 0, comm), "MPI_Bcast");
  text.resize(static_cast<std::size_t>(size));
  mpi_check(MPI_Bcast(text.data(), static_cast<int>(size), MPI_BYTE, 0, comm), "MPI_Bcast");
  return text;
}

}  // namespace

NcclBootstrap nccl_bootstrap_from_mpi(const BootstrapAgreement& agreement, MPI_Comm comm) {
  int initialized = 0;
  mpi_check(MPI_Initialized(&initialized), "MPI_Initialized");
  if (initialized == 0) {
    int provided = 0;
    mpi_check(MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    std::atexit([] {
      int finalized = 0;
      MPI_Finalized(&finalized);
      if (finalized == 0) MPI_Finalize();
    });
  }
  NcclBootstrap bootstrap;
  mpi_check(MPI_Comm_rank(comm, &bootstrap.rank.rank), "MPI_Comm_rank");
  mpi_check(MPI_Comm_size(comm, &bootstrap.rank.world), "MPI_Comm_size");
  MPI_Comm node = MPI_COMM_NULL;
  mpi_check(
      MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, bootstrap.rank.rank, MPI_INFO_NULL, &node),
      "MPI_Comm_split_type");
  mpi_check(MPI_Comm_rank(node, &bootstrap.rank.local_rank), "MPI_Comm_rank (node)");
  mpi_check(MPI_Comm_free(&node), "MPI_Comm_free");
  const std::vector<std::string> payloads =
      gather_payloads(agreement.payload, bootstrap.rank.rank, bootstrap.rank.world, comm);
  bootstrap.settled = broadcast_text(
      bootstrap.rank.rank == 0 ? settle_payloads(agreement, payloads) : std::string(), comm);
  if (bootstrap.rank.rank == 0) {
    const ncclResult_t status = nccl().GetUniqueId(&bootstrap.id);
    ZL_CHECK(status == ncclSuccess, "NCCL call ncclGetUniqueId failed: {}",
             nccl().GetErrorString(status));
  }
  mpi_check(MPI_Bcast(bootstrap.id.internal, sizeof(bootstrap.id.internal), MPI_BYTE, 0, comm),
            "MPI_Bcast");
  return bootstrap;
}

}  // namespace zl
