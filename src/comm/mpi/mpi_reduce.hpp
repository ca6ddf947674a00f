// mpi_reduce.hpp — the two ways the MPI backend reduces, named for the command line. Kept apart
// from mpi_comm.hpp so that code built without MPI (the trainer's config, the flags) can name them.
#pragma once

#include <cstdint>
#include <string_view>

namespace zl {

/// How MpiComm's all_reduce and reduce_scatter combine the ranks' values.
enum class MpiReduce : std::uint8_t {
  /// Every rank receives every rank's block and sums it with reduce_rank_order (comm/reduce.hpp):
  /// rank 0, 1, ..., W-1 for every element, so the results are bitwise the sim backend's.
  Deterministic,
  /// MPI's own MPI_Allreduce and MPI_Reduce_scatter_block: the library picks the order, so the
  /// results are close to the sim backend's, not equal (docs/backends.md states the tolerance).
  Native,
};

/// "deterministic" or "native".
std::string_view mpi_reduce_name(MpiReduce mode);

}  // namespace zl
