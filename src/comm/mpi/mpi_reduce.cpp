// mpi_reduce.cpp — names of the MPI backend's reduction modes (built with or without MPI).
#include "comm/mpi/mpi_reduce.hpp"

namespace zl {

std::string_view mpi_reduce_name(MpiReduce mode) {
  return mode == MpiReduce::Native ? "native" : "deterministic";
}

}  // namespace zl
