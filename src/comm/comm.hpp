// comm.hpp — the collective interface every engine talks to. Three backends implement it:
// sim (threads, bit-exact), mpi (processes) and nccl (GPUs). Buffers are raw pointers with an
// element count and a dtype, as in NCCL; every call is recorded in the rank's traffic ledger.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string_view>
#include <utility>
#include <vector>

#include "comm/traffic_ledger.hpp"
#include "core/dtype.hpp"

namespace zl {

/// How a reduction combines the ranks' values. Avg is Sum followed by one division by the
/// world size (see reduce.hpp); Max propagates NaN so an overflow on any rank is seen by all.
enum class ReduceOp { Sum, Avg, Max };

/// "sum", "avg" or "max".
std::string_view reduce_op_name(ReduceOp op);

/// A collective started by an async call. wait() returns once the call's output is complete and
/// its input may be reused; until then neither buffer may be touched. Every handle must be
/// waited (once) before the next blocking call of the same rank, in any order. Move-only; a
/// default-constructed handle is already complete.
class CommHandle {
 public:
  CommHandle() = default;
  /// A handle whose wait() runs `wait_fn` once.
  explicit CommHandle(std::function<void()> wait_fn) : wait_fn_(std::move(wait_fn)) {}
  /// Takes over the pending wait; only the new handle may be waited afterwards.
  CommHandle(CommHandle&&) = default;
  /// Takes over the pending wait; a handle still pending must be waited before it is assigned to.
  CommHandle& operator=(CommHandle&&) = default;
  CommHandle(const CommHandle&) = delete;
  CommHandle& operator=(const CommHandle&) = delete;

  /// Blocks until the collective is complete (at once if it already is), as a blocking call
  /// does: for NcclComm on a GPU's memory, until the device's later work and host reads are
  /// ordered after it.
  void wait() {
    if (wait_fn_) std::exchange(wait_fn_, nullptr)();
  }
  /// True when wait() has nothing left to wait for.
  bool waited() const { return !wait_fn_; }

 private:
  std::function<void()> wait_fn_;
};

/// One rank's handle on a group of `size()` ranks. Calls are collective: every rank must make
/// the same sequence of calls with the same op, dtype, counts and root. Blocking: a call returns
/// when this rank's output is complete and its input may be reused, for whatever reads or writes
/// them next (on a GPU's memory, NcclComm orders the device's later work and host reads after
/// the call instead of holding the host). The async forms start the
/// same collective and return a handle to wait on, so computation can go on meanwhile
/// (overlap_comm); they count in the same call sequence. The base class runs them blocking and
/// returns a complete handle; backends with a comm stream override them.
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

  /// all_reduce, started; the result is in `data` after wait().
  virtual CommHandle all_reduce_async(void* data, std::size_t count, DType dtype, ReduceOp op) {
    all_reduce(data, count, dtype, op);
    return {};
  }
  /// reduce_scatter, started; the result is in `recv` after wait().
  virtual CommHandle reduce_scatter_async(const void* send, void* recv, std::size_t recv_count,
                                          DType dtype, ReduceOp op) {
    reduce_scatter(send, recv, recv_count, dtype, op);
    return {};
  }
  /// all_gather, started; the result is in `recv` after wait().
  virtual CommHandle all_gather_async(const void* send, void* recv, std::size_t send_count,
                                      DType dtype) {
    all_gather(send, recv, send_count, dtype);
    return {};
  }

  /// Every rank sends block b of `send` (`count` elements each, W blocks) to rank b, which
  /// receives it as block r of its `recv` (W blocks): ZeRO++'s qgZ moves its quantized gradients
  /// so. The buffers must not overlap. The base class has none: it throws zl::Error.
  virtual void all_to_all(const void* send, void* recv, std::size_t count, DType dtype);

  /// Splits this group's ranks into groups, as MPI_Comm_split and ncclCommSplit do: a collective
  /// (every rank calls it, in its call sequence) where each rank passes a `color`; the ranks with
  /// the same color form one group, numbered in their order here. Returns this rank's Comm of its
  /// group, with a call sequence of its own; it must be destroyed before this one. The base class
  /// has no groups: it throws zl::Error.
  virtual std::unique_ptr<Comm> split(int color);

  /// Notes a copy of `bytes` between this rank's device and host memory that the caller made
  /// (ZeRO-Offload's gradients and updated parameters, offload_param's shards): not a collective,
  /// no other rank takes part. Recorded in the traffic ledger; backends that keep a timeline also
  /// put it there, priced on the host link (docs/timeline.md).
  virtual void host_copy(HostCopy direction, std::int64_t bytes) {
    traffic().record_copy(direction, bytes);
  }

  /// Notes a read or write of `bytes` of a swap file on this rank's disk that the caller made and
  /// timed (`ms`: ZeRO-Infinity's NVMe tier). Recorded in the traffic ledger; backends that keep a
  /// timeline also put it there, priced on the disk link (docs/timeline.md).
  virtual void disk_io(DiskIo direction, std::int64_t bytes, double ms) {
    traffic().record_disk(direction, bytes, ms);
  }

  /// Notes that a read or write of `bytes` of a swap file started on this rank's disk and goes on
  /// while the caller computes (pipeline_read, pipeline_write); disk_io_waited() notes when the
  /// caller waits for it. The traffic ledger is the caller's to fill (TrafficLedger::record_disk);
  /// backends that keep a timeline put the read or write on the rank's disk stream
  /// (docs/timeline.md). Returns the id for disk_io_waited (0: nothing kept).
  virtual std::int64_t disk_io_started(DiskIo direction, std::int64_t bytes) {
    static_cast<void>(direction);
    static_cast<void>(bytes);
    return 0;
  }
  /// Notes that the caller waits now for the read or write disk_io_started returned `id` for.
  virtual void disk_io_waited(std::int64_t id) { static_cast<void>(id); }

  /// Bytes and calls this rank has sent and received so far, over its world and the world's
  /// groups: a group's Comm (split()) counts in its world's ledger.
  TrafficLedger& traffic() { return world_ledger_ != nullptr ? *world_ledger_ : traffic_; }
  /// Read-only view of this rank's traffic ledger.
  const TrafficLedger& traffic() const {
    return world_ledger_ != nullptr ? *world_ledger_ : traffic_;
  }

 protected:
  /// For a group made by split(): its calls are counted in `parent`'s ledger (its world's).
  void count_in(Comm& parent) { world_ledger_ = &parent.traffic(); }
  /// A split's first step, on every backend: every rank's `color` all-gathered over this group
  /// (a counted call). Returns the world ranks of this rank's group in rank order, mapped by
  /// `world_ranks` (empty: this group is the world), with this rank's place among them in
  /// `rank_in_group` when given.
  std::vector<int> split_members(int color, const std::vector<int>& world_ranks,
                                 int* rank_in_group = nullptr);

 private:
  TrafficLedger traffic_;                  // the world's Comm's
  TrafficLedger* world_ledger_ = nullptr;  // a group's: its world's ledger
};

}  // namespace zl
