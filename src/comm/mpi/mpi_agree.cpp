// mpi_agree.cpp — MpiComm's guard around every call: the ranks agree that they make the same
// collective before any data moves (one all-reduce of a few integers: each field's largest and
// smallest value over the ranks), so ranks on different code paths fail with the sim's "collective
// mismatch at call #N" instead of a crash or a hang inside MPI; and no rank waits in a call longer
// than the collective timeout, as on the sim. Past the timeout the rank takes a roll call (every
// rank that times out tells every other rank its call number, point to point) and names the ranks
// it did not hear from: the one a network partition cut off, a stuck rank or a dead one.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <thread>

#include "call_signature.hpp"
#include "comm/mpi/mpi_comm.hpp"
#include "core/error.hpp"

namespace zl {

namespace {

// The roll call's point-to-point tag (the collectives do not use tags), and how long it listens
// at most: every rank that waits in the same call times out within about this spread of each
// other, so it hears the others that are there.
constexpr int kRollCallTag = 7001;
constexpr std::chrono::milliseconds kRollCallMax{2000};

}  // namespace

void MpiComm::agree(std::int64_t call_number, const CallDesc& call, std::string_view name) {
  const CallSignature own = call_signature(call, name);
  SignatureBounds bounds = signature_bounds(own);
  waiting_in_ = fmt::format("call #{} {}", call_number,
                            name.empty() ? zl::describe(call) : std::string(name));
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Iallreduce(MPI_IN_PLACE, bounds.data(), static_cast<int>(bounds.size()), MPI_INT64_T, MPI_MAX,
                 comm_, &request);
  wait_or_abort(request);
  if (signatures_agree(bounds)) return;
  // Every rank saw the same bounds, so every rank is here: gather who called what.
  std::vector<CallSignature> all(static_cast<std::size_t>(world_));
  MPI_Request gather = MPI_REQUEST_NULL;
  MPI_Iallgather(own.data(), kSignatureFields, MPI_INT64_T, all.data(), kSignatureFields,
                 MPI_INT64_T, comm_, &gather);
  wait_or_abort(gather);
  fail("{}", signature_mismatch(call_number, all));
}

void MpiComm::wait_or_abort(MPI_Request& request) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_;
  // Spin briefly (most calls complete within microseconds), then poll less often.
  for (int polls = 0;; ++polls) {
    int done = 0;
    MPI_Test(&request, &done, MPI_STATUS_IGNORE);
    if (done != 0) return;
    if (std::chrono::steady_clock::now() > deadline) {
      const std::chrono::milliseconds listen = std::min(timeout_, kRollCallMax);
      mpi_abort(timeout_message(roll_call(listen), listen));
    }
    if (polls > 1000) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

std::vector<std::int64_t> MpiComm::roll_call(std::chrono::milliseconds listen) {
  const auto world = static_cast<std::size_t>(world_);
  std::vector<std::int64_t> heard(world, 0);
  heard[static_cast<std::size_t>(rank_)] = agreed_;
  std::vector<MPI_Request> receives(world, MPI_REQUEST_NULL), sends(world, MPI_REQUEST_NULL);
  for (int r = 0; r < world_; ++r) {
    if (r == rank_) continue;
    const auto at = static_cast<std::size_t>(r);
    MPI_Irecv(&heard[at], 1, MPI_INT64_T, r, kRollCallTag, comm_, &receives[at]);
    MPI_Isend(&agreed_, 1, MPI_INT64_T, r, kRollCallTag, comm_, &sends[at]);
  }
  const auto deadline = std::chrono::steady_clock::now() + listen;
  for (;;) {
    // MPI_Testall leaves every request as it was unless all are done: test them one by one.
    bool waiting = false;
    for (auto& receive : receives) {
      int done = 0;
      MPI_Test(&receive, &done, MPI_STATUS_IGNORE);
      waiting = waiting || done == 0;
    }
    if (!waiting || std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // The ranks not heard from: cancel the receives (their buffers are about to go); the sends'
  // buffer is agreed_, which outlives the job's end.
  for (std::size_t r = 0; r < world; ++r) {
    if (receives[r] != MPI_REQUEST_NULL) {
      MPI_Cancel(&receives[r]);
      MPI_Wait(&receives[r], MPI_STATUS_IGNORE);
      heard[r] = 0;
    }
    if (sends[r] != MPI_REQUEST_NULL) MPI_Request_free(&sends[r]);
  }
  return heard;
}

std::string MpiComm::timeout_message(const std::vector<std::int64_t>& heard,
                                     std::chrono::milliseconds listen) const {
  std::vector<int> silent, elsewhere;
  for (int r = 0; r < world_; ++r) {
    const std::int64_t call = heard[static_cast<std::size_t>(r)];
    if (call == 0) silent.push_back(r);
    if (call != 0 && call != agreed_) elsewhere.push_back(r);
  }
  std::string message =
      fmt::format("timeout after {} ms: rank {} waits in {}", timeout_.count(), rank_, waiting_in_);
  if (silent.empty()) {
    message += "; every rank answers the roll call, so MPI itself is stuck";
  } else if (silent.size() + 1 == static_cast<std::size_t>(world_) && world_ > 2) {
    message += fmt::format(
        "; no other rank answers within {} ms: rank {} is cut off from the others (network "
        "partition?) or they are all gone",
        listen.count(), rank_);
  } else {
    message += fmt::format("; {} {} {} not answer within {} ms (unreachable, stuck or gone)",
                           silent.size() == 1 ? "rank" : "ranks", fmt::join(silent, ", "),
                           silent.size() == 1 ? "does" : "do", listen.count());
  }
  for (const int r : elsewhere) {
    message += fmt::format("; rank {} waits in call #{}", r, heard[static_cast<std::size_t>(r)]);
  }
  return message;
}

}  // namespace zl
