// nccl_mpi_bootstrap.hpp — the NCCL bootstrap under mpirun: MPI says who each process is, rank 0
// makes the ncclUniqueId and MPI_Bcast hands it to the others. Built when MPI is found
// (ZL_NCCL_WITH_MPI).
#pragma once

#include <mpi.h>

#include "comm/nccl/nccl_bootstrap.hpp"

namespace zl {

/// Rank and world from `comm`, the local rank from the processes sharing this node
/// (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED), and rank 0's id by MPI_Bcast. Initialises MPI
/// (MPI_Init_thread, funneled, finalised at exit) when nothing has yet. Collective over `comm`.
NcclBootstrap nccl_bootstrap_from_mpi(MPI_Comm comm = MPI_COMM_WORLD);

}  // namespace zl
