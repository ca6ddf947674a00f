// sim_comm.hpp — one simulated rank's Comm: counts its calls of each collective, injects the
// faults it was given, checks its arguments, posts each call at the shared rendezvous, waits for
// it, and records the call's ring volume in its traffic ledger.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "call_desc.hpp"
#include "comm/comm.hpp"
#include "fault_injection.hpp"
#include "rendezvous.hpp"

namespace zl {

/// The Comm that SimWorld::run() hands to rank `rank()`. Every call blocks until all ranks have
/// made the same call; results are bit-exact (rank-order reductions, see comm/reduce.hpp).
class SimComm final : public Comm {
 public:
  /// Rank `rank` of `world`, meeting the others at `rendezvous` (which must outlive it), with the
  /// faults of `faults` whose rank is `rank` injected into its calls.
  SimComm(int rank, int world, Rendezvous& rendezvous, const std::vector<FaultSpec>& faults = {});

  int rank() const override { return rank_; }
  int size() const override { return world_; }

  void all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                      ReduceOp op) override;
  void all_gather(const void* send, void* recv, std::size_t send_count, DType dtype) override;
  void broadcast(void* data, std::size_t count, DType dtype, int root) override;
  void barrier() override;

  /// "rank R: fault ... never fired: ..." for the first of this rank's faults whose call it never
  /// made, or nullopt when every fault fired.
  std::optional<std::string> unfired_fault() const;

 private:
  // Counts `call`, injects its fault if it has one, checks its arguments, posts it, waits for it
  // and records its traffic.
  void run_blocking(const CallDesc& call);

  // Carries out `fault` at `call`, which is this rank's `nth` call of its kind. Returns false when
  // the rank skips the call.
  bool inject(const FaultSpec& fault, const CallDesc& call, std::int64_t nth);

  int rank_;
  int world_;
  Rendezvous& rendezvous_;
  std::vector<FaultSpec> faults_;  // this rank's only
  // Calls of each kind this rank reached, skipped ones included.
  std::array<std::int64_t, kCollectiveKindCount> calls_of_kind_{};
  std::int64_t calls_posted_ = 0;
};

}  // namespace zl
