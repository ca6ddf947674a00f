// mpi_rank_failure.cpp — run under `mpirun -np 4`: every rank makes collectives in a loop, and
// midway rank 2 fails, as argv[1] says: "kill" (SIGKILL, the rank dies without a word), "throw"
// (the rank throws, and reports it as the trainer does: mpi_abort, "rank 2: ..."), "diverge" (it
// makes a different collective, as a rank on another code path would) or "stall" (it stops making
// calls; the others wait 2 s, the collective timeout). The test checks that the job then ends,
// non-zero, naming the rank or the call, instead of crashing inside MPI or waiting for ever.
#include <fmt/format.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string_view>
#include <thread>
#include <vector>

#include "comm/mpi/mpi_comm.hpp"
#include "core/error.hpp"

int main(int argc, char** argv) {
  using namespace zl;
  const std::string_view how = argc > 1 ? argv[1] : "kill";
  MpiComm comm(MpiReduce::Deterministic, {}, std::chrono::seconds(2));
  std::vector<float> values(1000, 1.0f);
  constexpr int kCalls = 200000;  // far more than the test waits for: only the failure ends it
  try {
    for (int call = 0; call < kCalls; ++call) {
      if (comm.rank() == 2 && call == 50) {
        if (how == "kill") std::raise(SIGKILL);
        if (how == "stall") std::this_thread::sleep_for(std::chrono::seconds(60));
        if (how == "diverge") {
          std::vector<float> gathered(values.size() * 4);
          comm.all_gather(values.data(), gathered.data(), values.size(), DType::F32);
        }
        if (how == "throw") fail("collective #{} failed on purpose", call);
      }
      comm.all_reduce(values.data(), values.size(), DType::F32, ReduceOp::Max);
    }
  } catch (const std::exception& e) {
    mpi_abort(e.what());
  }
  fmt::print("rank {}: all {} calls done: the failure never came\n", comm.rank(), kCalls);
  return EXIT_FAILURE;
}
