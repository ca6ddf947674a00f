// sim_comm.hpp — one simulated rank's Comm: counts its calls of each collective, injects the
// faults it was given, checks its arguments, posts each call at the shared rendezvous, waits for
// it, records the call's ring volume in its traffic ledger and puts it on the rank's timeline.
// Async calls move their data at issue too (all ranks meet at the rendezvous), but on the
// timeline they run on the comm stream and hold the compute clock only at wait(). Host copies
// (offload) go on the timeline too, priced on the host link. split() makes a group's SimComm,
// which meets its group's ranks at the group's rendezvous and shares its rank's timeline and
// traffic ledger.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "call_desc.hpp"
#include "comm/comm.hpp"
#include "fault_injection.hpp"
#include "rendezvous.hpp"
#include "sim_groups.hpp"
#include "timeline.hpp"

namespace zl {

/// The Comm that SimWorld::run() hands to rank `rank()`. Every call blocks until all ranks have
/// made the same call; results are bit-exact (rank-order reductions, see comm/reduce.hpp).
class SimComm final : public Comm {
 public:
  /// Rank `rank` of `world`, meeting the others at `rendezvous` (which must outlive it), with the
  /// faults of `faults` whose rank is `rank` injected into its calls. With a `board` (which must
  /// outlive it too) the rank keeps a timeline under `timeline`. With `groups` (which must outlive
  /// it and every group made from it) it can split().
  SimComm(int rank, int world, Rendezvous& rendezvous, const std::vector<FaultSpec>& faults = {},
          TimelineBoard* board = nullptr, const TimelineOptions& timeline = {},
          SimGroups* groups = nullptr);

  int rank() const override { return rank_; }
  int size() const override { return world_; }

  void all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                      ReduceOp op) override;
  void all_gather(const void* send, void* recv, std::size_t send_count, DType dtype) override;
  void broadcast(void* data, std::size_t count, DType dtype, int root) override;
  void barrier() override;
  void all_to_all(const void* send, void* recv, std::size_t count, DType dtype) override;

  CommHandle all_reduce_async(void* data, std::size_t count, DType dtype, ReduceOp op) override;
  CommHandle reduce_scatter_async(const void* send, void* recv, std::size_t recv_count, DType dtype,
                                  ReduceOp op) override;
  CommHandle all_gather_async(const void* send, void* recv, std::size_t send_count,
                              DType dtype) override;

  /// A collective of this group: all_gather of the colors, then the group of the ranks with
  /// `color`, in their order here. The group's calls meet only its ranks, are counted in this
  /// rank's traffic ledger (the world's SimComm's: the group's own stays empty) and go on its
  /// timeline, priced for the group's ranks and the nodes they span (plan_group_collective).
  /// Throws zl::Error for a SimComm made without groups.
  std::unique_ptr<Comm> split(int color) override;

  /// Records the copy in the traffic ledger and, with a timeline, blocks its compute stream for
  /// the copy's time on the host link.
  void host_copy(HostCopy direction, std::int64_t bytes) override;

  /// Records the read or write in the traffic ledger and, with a timeline, blocks its compute
  /// stream for its time on the disk link.
  void disk_io(DiskIo direction, std::int64_t bytes, double ms) override;
  /// On the timeline's disk stream (RankTimeline::disk_start); 0 without a timeline.
  std::int64_t disk_io_started(DiskIo direction, std::int64_t bytes) override;
  /// The timeline's compute stream waits for it (RankTimeline::disk_wait).
  void disk_io_waited(std::int64_t id) override;

  /// This rank's timeline; null without a board.
  RankTimeline* timeline() { return timeline_; }
  /// Read-only view of this rank's timeline; null without a board.
  const RankTimeline* timeline() const { return timeline_; }

  /// "rank R: fault ... never fired: ..." for the first of this rank's faults whose call it never
  /// made, or nullopt when every fault fired.
  std::optional<std::string> unfired_fault() const;

 private:
  // Rank `rank` of `group`, split from `parent`: its timeline, ledger and groups.
  SimComm(SimComm& parent, SimGroup& group, int rank);

  // Counts `call`, injects its fault if it has one, checks its arguments, posts it, waits for it
  // and records its traffic and its timeline. Returns the timeline's call number (the rendezvous'
  // without a timeline), or 0 when the rank skipped the call.
  std::int64_t run_call(const CallDesc& call, bool async);

  // A handle whose wait() joins the timeline's clocks with async call `call_number`.
  CommHandle handle_of(std::int64_t call_number);

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
  TimelineBoard* board_;
  std::optional<RankTimeline> own_timeline_;  // the world's SimComm's
  RankTimeline* timeline_ = nullptr;          // own_timeline_, or the world's SimComm's
  // The rank's calls on its timeline, over the world and its groups: their timeline numbers.
  std::shared_ptr<std::int64_t> timeline_calls_ = std::make_shared<std::int64_t>(0);
  SimGroups* groups_ = nullptr;
  int group_id_ = 0;              // 0: the world
  std::vector<int> world_ranks_;  // a group's: rank r is world rank world_ranks_[r]
  int group_nodes_ = 0;           // a group's: the nodes its ranks span
  int group_leader_ = 0;          // a group's: its lowest world rank (CallInfo::group_leader)
  std::int64_t splits_ = 0;       // split() calls so far
  int gpus_per_node_ = kOneNode;  // the world's layout
  LinkLevel level_ = LinkLevel::Inside;  // which links this group's bytes cross
};

/// The timeline of `comm` when it is a SimComm that keeps one, else null: how the trainer names
/// compute spans and marks steps.
RankTimeline* sim_timeline(Comm& comm);

}  // namespace zl
