// mpi_comm.hpp — the MPI backend: one rank per process under `mpirun -np W` (OpenMPI), over a
// duplicate of MPI_COMM_WORLD. Two reduction modes (mpi_reduce.hpp):
//   deterministic  reduce_scatter: MPI_Alltoall hands rank r every rank's block r, which it sums
//                  with reduce_rank_order; all_reduce: the same over W near-equal chunks, then
//                  MPI_Allgatherv. Every element is summed rank 0, 1, ..., W-1, as on the sim.
//   native         MPI_Allreduce / MPI_Reduce_scatter_block with MPI_SUM (fp32, fp64) or a user
//                  op that adds two 16-bit values in float (bf16, fp16); Avg is that sum, then one
//                  division by W. Max is a user op in both modes, so a NaN on any rank reaches all.
// all_gather, broadcast and barrier are MPI's own in both modes (they move bits, never add them).
// Every MPI call is non-blocking and waited for with the collective timeout (mpi_agree.cpp), so a
// rank never waits for ever, even when a peer vanishes mid-transfer (a network partition).
// Every call is recorded in the traffic ledger with the ring volume the sim records
// (comm/traffic_ledger.hpp) and on the rank's own timeline (sim/timeline.hpp), host copies too,
// so an MPI rank's ledger equals the sim rank's. The async forms run blocking (the Comm base
// class). split() makes a group's MpiComm over MPI_Comm_split, which counts its calls in the
// world's ledger and puts them on the world's timeline, as the sim's groups do (mpi_groups.cpp).
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "call_desc.hpp"
#include "comm/comm.hpp"
#include "comm/mpi/mpi_reduce.hpp"
#include "comm/reduce.hpp"
#include "timeline.hpp"

namespace zl {

/// Ranks in this MPI job (mpirun's -np; 1 when the process was started without mpirun).
/// Initialises MPI on first use (MPI_Init_thread, funneled: only the main thread calls MPI) and
/// finalizes it when the process exits normally.
int mpi_world_size();

/// This process's rank in MPI_COMM_WORLD; initialises MPI as mpi_world_size() does.
int mpi_world_rank();

/// The MPI datatype that moves `dtype` (16-bit floats as their bits: only reductions read them).
MPI_Datatype mpi_datatype(DType dtype);

/// Ends the whole job from a failing rank: prints "zerolab: error: rank R: <message>" on stderr
/// and calls MPI_Abort, so no other rank waits for this one in a collective.
[[noreturn]] void mpi_abort(std::string_view message);

/// One process's rank of an MPI job, as a Comm.
class MpiComm final : public Comm {
 public:
  /// This process's rank of MPI_COMM_WORLD (initialising MPI if needed), reducing as `mode` says,
  /// with a timeline kept under `timeline` (started now). Before every collective the ranks
  /// check, in one small all-reduce, that they all make the same call (the sim's check: kind, op,
  /// dtype, count, root); a mismatch throws zl::Error on every rank naming the call number and
  /// each side's call. A rank that waits longer than `timeout` for the others, in that check or
  /// in the transfer, asks every rank whether it is there (a roll call of up to 2 s) and ends the
  /// job (mpi_abort) naming the call it waits in and the ranks that did not answer. Deterministic
  /// reductions sum by node when `gpus_per_node` splits the world (comm/reduce.hpp).
  explicit MpiComm(MpiReduce mode, const TimelineOptions& timeline = {},
                   std::chrono::milliseconds timeout = std::chrono::seconds(120),
                   int gpus_per_node = kOneNode);
  /// Frees the duplicated communicator and the user ops.
  ~MpiComm() override;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return world_; }
  /// The reduction mode given at construction.
  MpiReduce mode() const { return mode_; }

  void all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                      ReduceOp op) override;
  void all_gather(const void* send, void* recv, std::size_t send_count, DType dtype) override;
  void broadcast(void* data, std::size_t count, DType dtype, int root) override;
  void barrier() override;
  /// MPI_Ialltoall: block r of `send` (`count` elements) goes to rank r.
  void all_to_all(const void* send, void* recv, std::size_t count, DType dtype) override;
  /// The ranks of this group with the same `color` (at least 0), in rank order, as a group whose
  /// calls are counted in this rank's one ledger and timeline: the colors are all-gathered first
  /// (agreed, timed out and counted, as the sim's are), then MPI_Comm_split. A group's reductions
  /// add in its rank order, as the sim's groups do.
  std::unique_ptr<Comm> split(int color) override;

  /// Records the copy in the traffic ledger and on the timeline, priced on the host link.
  void host_copy(HostCopy direction, std::int64_t bytes) override;
  /// Records the swap-file read or write in the traffic ledger and on the timeline, priced on the
  /// disk link.
  void disk_io(DiskIo direction, std::int64_t bytes, double ms) override;
  /// On the timeline's disk stream (RankTimeline::disk_start).
  std::int64_t disk_io_started(DiskIo direction, std::int64_t bytes) override;
  /// The timeline's compute stream waits for it (RankTimeline::disk_wait).
  void disk_io_waited(std::int64_t id) override;

  /// This rank's timeline: measured CPU time for compute; each collective on the comm stream for
  /// its alpha-beta time on the link, starting when this rank is ready (the rank's own clocks:
  /// unlike the sim, it does not wait for the slowest rank's clock). A group's is the world's.
  RankTimeline& timeline() { return *timeline_; }

  /// Out of band, not a training collective: rank 0 receives every rank's `bytes` (index = rank);
  /// the other ranks get an empty vector. Not recorded in the traffic ledger or the timeline:
  /// it carries the run's reports (ledgers, checkpoint file entries) to the process that writes
  /// them. Every rank must call it.
  std::vector<std::string> gather_to_root(std::string_view bytes);

  /// Out of band, as gather_to_root: every rank returns rank 0's `bytes` (the others' are
  /// ignored). Every rank must call it.
  std::string broadcast_from_root(std::string_view bytes);

 private:
  // Rank `rank` of the group `group` split from `parent`, whose world ranks are `world_ranks`.
  MpiComm(MpiComm& parent, MPI_Comm group, std::vector<int> world_ranks);
  // The user ops of native reductions and of Max.
  void create_user_ops();

  // Checks `call`, agrees on it with every rank, runs `transfer`, then records the call's ring
  // volume and timeline span.
  void run_call(const CallDesc& call, const std::function<void()>& transfer);
  // Every rank's call `call_number` is `call` (described by `name` for gather_to_root and
  // broadcast_from_root, which are not CallDescs); throws zl::Error naming the first rank whose
  // call differs, on every rank.
  void agree(std::int64_t call_number, const CallDesc& call, std::string_view name = {});
  // Waits for `request`, part of the call agree() last checked, until the timeout; past it, ends
  // the job naming the call and the ranks that do not answer the roll call.
  void wait_or_abort(MPI_Request& request);
  // After a timeout: every rank that times out sends its call number to every other rank and
  // listens for theirs until `listen`; returns each rank's call number as heard (this rank's
  // own; 0 for a rank not heard from).
  std::vector<std::int64_t> roll_call(std::chrono::milliseconds listen);
  // The timeout's one-line message, from the roll call's answers.
  std::string timeout_message(const std::vector<std::int64_t>& heard,
                              std::chrono::milliseconds listen) const;
  // Deterministic mode: the rank-order reductions.
  void all_reduce_rank_order(void* data, std::size_t count, DType dtype, ReduceOp op);
  void reduce_scatter_rank_order(const void* send, void* recv, std::size_t recv_count, DType dtype,
                                 ReduceOp op);
  // Native mode: MPI's reductions, then the division of Avg.
  void all_reduce_native(void* data, std::size_t count, DType dtype, ReduceOp op);
  void reduce_scatter_native(const void* send, void* recv, std::size_t recv_count, DType dtype,
                             ReduceOp op);
  // The MPI_Op that native mode reduces `dtype` with under `op`.
  MPI_Op native_op(DType dtype, ReduceOp op) const;

  MpiReduce mode_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int world_ = 1;
  int gpus_per_node_ = kOneNode;  // the node layout deterministic reductions follow
  int world_gpus_per_node_ = kOneNode;   // the world's layout, which the link levels follow
  std::vector<int> world_ranks_;         // rank r is world rank world_ranks_[r]
  LinkLevel level_ = LinkLevel::Inside;  // which links this group's bytes cross
  int group_nodes_ = 0;                  // a group's: the nodes its ranks span (0: the world)
  int group_leader_ = 0;                 // a group's: its lowest world rank
  // Collective calls made by this rank over the world and its groups: the timeline's numbers.
  std::shared_ptr<std::int64_t> calls_ = std::make_shared<std::int64_t>(0);
  std::int64_t agreed_ = 0;  // calls checked by agree(), out-of-band ones included
  std::string waiting_in_;   // the call agree() last checked, as timeout messages name it
  std::chrono::milliseconds timeout_;
  std::map<std::pair<DType, ReduceOp>, MPI_Op> user_ops_;
  std::unique_ptr<RankTimeline> own_timeline_;  // the world's MpiComm's
  RankTimeline* timeline_ = nullptr;            // own_timeline_, or the world's MpiComm's
};

}  // namespace zl
