// mpi_launch.hpp — the one place that says how the MPI tests start a job: the mpirun that CMake
// found (ZL_MPIEXEC), --oversubscribe (CI has fewer cores than ranks), --allow-run-as-root when
// the tests run as root (containers), and ZL_MPIRUN_FLAGS from CMake for what a machine needs
// besides (e.g. "--mca btl self,tcp" or "--mca btl_vader_single_copy_mechanism none" in some
// containers; docs/backends.md). The launched processes get ASAN_OPTIONS=detect_leaks=0:
// OpenMPI keeps allocations until exit by design, which LeakSanitizer would report.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <string>

namespace zl::test {

/// "env ASAN_OPTIONS=detect_leaks=0 ": put before any command whose processes initialise MPI,
/// under mpirun or not (`zerolab train --backend mpi` alone is an MPI singleton).
inline std::string without_leak_check() {
  return "env ASAN_OPTIONS=detect_leaks=0 ";
}

/// "env ASAN_OPTIONS=... <mpirun> <flags> -np <ranks> " — put the program and its arguments after
/// it.
inline std::string mpirun(int ranks) {
  const std::string root = ::geteuid() == 0 ? " --allow-run-as-root" : "";
  return fmt::format("{}{} --oversubscribe{} {} -np {} ", without_leak_check(), ZL_MPIEXEC, root,
                     ZL_MPIRUN_FLAGS, ranks);
}

}  // namespace zl::test
