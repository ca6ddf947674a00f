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
#include <array>
#include <chrono>
#include <string>
#include <thread>

#include "comm/mpi/mpi_comm.hpp"
#include "core/error.hpp"

namespace zl {

namespace {

constexpr int kFields = 5;  // kind, op, dtype, count, root
// Kinds of the out-of-band calls, beyond every CollectiveKind.
constexpr std::int64_t kOutOfBandKind = 100;
// The roll call's point-to-point tag (the collectives do not use tags), and how long it listens
// at most: every rank that waits in the same call times out within about this spread of each
// other, so it hears the others that are there.
constexpr int kRollCallTag = 7001;
constexpr std::chrono::milliseconds kRollCallMax{2000};

using Signature = std::array<std::int64_t, kFields>;

// The fields same_signature() compares, the others zero: a barrier is its kind alone, only
// reductions have an op, only a broadcast a root.
Signature signature_of(const CallDesc& call, std::string_view name) {
  if (!name.empty()) {
    return {kOutOfBandKind + (name == "broadcast_from_root" ? 1 : 0), 0, 0, 0, 0};
  }
  if (call.kind == CollectiveKind::Barrier)
    return {static_cast<std::int64_t>(call.kind), 0, 0, 0, 0};
  return {static_cast<std::int64_t>(call.kind),
          is_reduction(call.kind) ? static_cast<std::int64_t>(call.op) : 0,
          static_cast<std::int64_t>(call.dtype), static_cast<std::int64_t>(call.count),
          call.kind == CollectiveKind::Broadcast ? call.root : 0};
}

std::string describe(const Signature& signature) {
  if (signature[0] >= kOutOfBandKind) {
    return signature[0] == kOutOfBandKind ? "gather_to_root" : "broadcast_from_root";
  }
  const CallDesc call{.kind = static_cast<CollectiveKind>(signature[0]),
                      .op = static_cast<ReduceOp>(signature[1]),
                      .dtype = static_cast<DType>(signature[2]),
                      .count = static_cast<std::size_t>(signature[3]),
                      .root = static_cast<int>(signature[4])};
  return zl::describe(call);
}

}  // namespace

void MpiComm::agree(std::int64_t call_number, const CallDesc& call, std::string_view name) {
  const Signature own = signature_of(call, name);
  // Largest of each field and of its negation: the ranks agree when largest == smallest.
  std::array<std::int64_t, 2 * kFields> bounds{};
  for (int f = 0; f < kFields; ++f) {
    bounds[static_cast<std::size_t>(f)] = own[static_cast<std::size_t>(f)];
    bounds[static_cast<std::size_t>(kFields + f)] = -own[static_cast<std::size_t>(f)];
  }
  waiting_in_ = fmt::format("call #{} {}", call_number,
                            name.empty() ? zl::describe(call) : std::string(name));
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Iallreduce(MPI_IN_PLACE, bounds.data(), 2 * kFields, MPI_INT64_T, MPI_MAX, comm_, &request);
  wait_or_abort(request);
  bool same = true;
  for (int f = 0; f < kFields; ++f) {
    same = same &&
           bounds[static_cast<std::size_t>(f)] == -bounds[static_cast<std::size_t>(kFields + f)];
  }
  if (same) return;
  // Every rank saw the same bounds, so every rank is here: gather who called what.
  std::vector<std::int64_t> all(static_cast<std::size_t>(world_) * kFields);
  MPI_Request gather = MPI_REQUEST_NULL;
  MPI_Iallgather(own.data(), kFields, MPI_INT64_T, all.data(), kFields, MPI_INT64_T, comm_,
                 &gather);
  wait_or_abort(gather);
  const auto of_rank = [&](int r) {
    Signature signature{};
    for (int f = 0; f < kFields; ++f) {
      signature[static_cast<std::size_t>(f)] = all[static_cast<std::size_t>(r * kFields + f)];
    }
    return signature;
  };
  int other = 1;
  while (other < world_ && of_rank(other) == of_rank(0)) ++other;
  fail(
      "collective mismatch at call #{}: rank 0 called {} but rank {} called {}: the ranks run "
      "different code paths (different flags or data on some rank?)",
      call_number, describe(of_rank(0)), other, describe(of_rank(other)));
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
