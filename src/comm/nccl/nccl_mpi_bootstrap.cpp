// nccl_mpi_bootstrap.cpp — ranks from MPI and the NCCL id by MPI_Bcast.
#include "comm/nccl/nccl_mpi_bootstrap.hpp"

#include <cstdlib>

#include "comm/nccl/nccl_library.hpp"
#include "core/error.hpp"

namespace zl {

namespace {

void mpi_check(int status, const char* call) {
  ZL_CHECK(status == MPI_SUCCESS, "MPI call {} failed with code {}", call, status);
}

}  // namespace

NcclBootstrap nccl_bootstrap_from_mpi(MPI_Comm comm) {
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
