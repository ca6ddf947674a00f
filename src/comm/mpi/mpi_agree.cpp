// mpi_agree.cpp — MpiComm's guard around every call: the ranks agree that they make the same
// collective before any data moves (one all-reduce of a few integers: each field's largest and
// smallest value over the ranks), so ranks on different code paths fail with the sim's "collective
// mismatch at call #N" instead of a crash or a hang inside MPI; and no rank waits in a call longer
// than the collective timeout, as on the sim.
#include <fmt/format.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "call_signature.hpp"
#include "comm/mpi/mpi_comm.hpp"
#include "core/error.hpp"

namespace zl {

void MpiComm::agree(std::int64_t call_number, const CallDesc& call, std::string_view name) {
  const CallSignature own = call_signature(call, name);
  SignatureBounds bounds = signature_bounds(own);
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Iallreduce(MPI_IN_PLACE, bounds.data(), static_cast<int>(bounds.size()), MPI_INT64_T, MPI_MAX,
                 comm_, &request);
  wait_or_abort(request, call_number, name.empty() ? zl::describe(call) : std::string(name));
  if (signatures_agree(bounds)) return;
  // Every rank saw the same bounds, so every rank is here: gather who called what.
  std::vector<CallSignature> all(static_cast<std::size_t>(world_));
  MPI_Allgather(own.data(), kSignatureFields, MPI_INT64_T, all.data(), kSignatureFields,
                MPI_INT64_T, comm_);
  fail("{}", signature_mismatch(call_number, all));
}

void MpiComm::wait_or_abort(MPI_Request& request, std::int64_t call_number, std::string_view what) {
  const auto start = std::chrono::steady_clock::now();
  const auto deadline = start + timeout_;
  // Spin briefly (most calls complete within microseconds), then poll less often.
  for (int polls = 0;; ++polls) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done != 0) return;
    if (std::chrono::steady_clock::now() > deadline) {
      mpi_abort(fmt::format(
          "timeout after {} ms: rank {} waits in call #{} {}; another rank never arrived (stuck, "
          "slower than --collective-timeout-ms, or gone)",
          timeout_.count(), rank_, call_number, what));
    }
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

}  // namespace zl
