// mpi_agree.cpp — MpiComm's guard around every call: the ranks agree that they make the same
// collective before any data moves (one all-reduce of a few integers: each field's largest and
// smallest value over the ranks), so ranks on different code paths fail with the sim's "collective
// mismatch at call #N" instead of a crash or a hang inside MPI; and no rank waits in a call longer
// than the collective timeout, as on the sim.
#include <fmt/format.h>

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

using Signature = std::array<std::int64_t, kFields>;

// The fields same_signature() compares, the others zero: a barrier is its kind alone, only
// reductions have an op, only a broadcast a root.
Signature signature_of(const CallDesc& call, std::string_view name) {
  if (!name.empty()) {
    return {kOutOfBandKind + (name == "broadcast_from_root" ? 1 : 0), 0, 0, 0, 0};
  }
  if (call.kind == CollectiveKind::Barrier) return {static_cast<std::int64_t>(call.kind), 0, 0, 0, 0};
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
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_Iallreduce(MPI_IN_PLACE, bounds.data(), 2 * kFields, MPI_INT64_T, MPI_MAX, comm_, &request);
  wait_or_abort(request, call_number, name.empty() ? zl::describe(call) : std::string(name));
  bool same = true;
  for (int f = 0; f < kFields; ++f) {
    same = same && bounds[static_cast<std::size_t>(f)] == -bounds[static_cast<std::size_t>(kFields + f)];
  }
  if (same) return;
  // Every rank saw the same bounds, so every rank is here: gather who called what.
  std::vector<std::int64_t> all(static_cast<std::size_t>(world_) * kFields);
  MPI_Allgather(own.data(), kFields, MPI_INT64_T, all.data(), kFields, MPI_INT64_T, comm_);
  const auto of_rank = [&](int r) {
    Signature signature{};
    for (int f = 0; f < kFields; ++f) {
      signature[static_cast<std::size_t>(f)] = all[static_cast<std::size_t>(r * kFields + f)];
    }
    return signature;
  };
  int other = 1;
  while (other < world_ && of_rank(other) == of_rank(0)) ++other;
  fail("collective mismatch at call #{}: rank 0 called {} but rank {} called {}: the ranks run "
       "different code paths (different flags or data on some rank?)",
       call_number, describe(of_rank(0)), other, describe(of_rank(other)));
}

void MpiComm::wait_or_abort(MPI_Request& request, std::int64_t call_number,
                            std::string_view what) {
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
