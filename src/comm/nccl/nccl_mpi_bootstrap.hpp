// nccl_mpi_bootstrap.hpp — the NCCL bootstrap under mpirun: MPI says who each process is, the
// ranks' payloads reach rank 0 by MPI_Gatherv, and rank 0's ncclUniqueId and settlement reach the
// others by MPI_Bcast. Built when MPI is found (ZL_NCCL_WITH_MPI).
#pragma once

#include <mpi.h>

#include "comm/nccl/nccl_bootstrap.hpp"

namespace zl {

/// Rank and world from `comm`, the local rank from the processes sharing this node
/// (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED), every rank's `agreement.payload` gathered to
/// rank 0, and rank 0's id and settlement by MPI_Bcast. Initialises MPI (MPI_Init_thread,
/// funneled, finalised at exit) when nothing has yet. Collective over `comm`.
NcclBootstrap nccl_bootstrap_from_mpi(const BootstrapAgreement& agreement = {},
                                      MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace zl
