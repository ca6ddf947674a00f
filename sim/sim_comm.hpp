// sim_comm.hpp — one simulated rank's Comm: checks its arguments, posts each call at the shared
// rendezvous, waits for it, and records the call's ring volume in its traffic ledger.
#pragma once

#include <cstddef>

#include "call_desc.hpp"
#include "comm/comm.hpp"
#include "rendezvous.hpp"

namespace zl {

/// The Comm that SimWorld::run() hands to rank `rank()`. Every call blocks until all ranks have
/// made the same call; results are bit-exact (rank-order reductions, see comm/reduce.hpp).
class SimComm final : public Comm {
 public:
  /// Rank `rank` of `world`, meeting the others at `rendezvous` (which must outlive it).
  SimComm(int rank, int world, Rendezvous& rendezvous);

  int rank() const override { return rank_; }
  int size() const override { return world_; }

  void all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                      ReduceOp op) override;
  void all_gather(const void* send, void* recv, std::size_t send_count, DType dtype) override;
  void broadcast(void* data, std::size_t count, DType dtype, int root) override;
  void barrier() override;

 private:
  // Checks `call`'s arguments, posts it, waits for it and records its traffic.
  void run_blocking(const CallDesc& call);

  int rank_;
  int world_;
  Rendezvous& rendezvous_;
};

}  // namespace zl
