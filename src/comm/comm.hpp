// comm.hpp — the collective interface every engine talks to. Three backends implement it:
// sim (threads, bit-exact), mpi (processes) and nccl (GPUs). Buffers are raw pointers with an
// element count and a dtype, as in NCCL; every call is recorded in the rank's traffic ledger.
#pragma once

#include <cstddef>
#include <string_view>

#include "comm/traffic_ledger.hpp"
#include "core/dtype.hpp"

namespace zl {

/// How a reduction combines the ranks' values. Avg is Sum followed by one division by the
/// world size (see reduce.hpp); Max propagates NaN so an overflow on any rank is seen by all.
enum class ReduceOp { Sum, Avg, Max };

/// "sum", "avg" or "max".
std::string_view reduce_op_name(ReduceOp op);

/// One rank's handle on a group of `size()` ranks. Calls are collective: every rank must make
/// the same sequence of calls with the same op, dtype, counts and root. Blocking: a call returns
/// when this rank's output is complete and its input may be reused. (Async forms returning a
/// handle to wait on are added beside these; the blocking ones stay.)
class Comm {
 public:
  virtual ~Comm() = default;

  /// This rank's index in [0, size()).
  virtual int rank() const = 0;
  /// Number of ranks in the group.
  virtual int size() const = 0;

  /// In place: every rank's `count` elements become the reduction over ranks.
  virtual void all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op) = 0;

  /// `send` holds size()*recv_count elements; rank r receives the reduction of block r.
  virtual void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                              ReduceOp op) = 0;

  /// `recv` receives size()*send_count elements: block r is rank r's `send`.
  virtual void all_gather(const void* send, void* recv, std::size_t send_count, DType dtype) = 0;

  /// In place: every rank's `count` elements become `root`'s.
  virtual void broadcast(void* data, std::size_t count, DType dtype, int root) = 0;

  /// Returns when every rank has entered it.
  virtual void barrier() = 0;

  /// Bytes and calls this rank has sent and received so far.
  TrafficLedger& traffic() { return traffic_; }
  const TrafficLedger& traffic() const { return traffic_; }

 protected:
  TrafficLedger traffic_;
};

}  // namespace zl
