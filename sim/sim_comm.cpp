// sim_comm.cpp — SimComm: call counts and injected faults, argument checks, then post, wait and
// record the ring volume and the timeline; host copies on the timeline.
#include "sim_comm.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "comm/traffic_ledger.hpp"
#include "core/error.hpp"

namespace zl {

SimComm::SimComm(int rank, int world, Rendezvous& rendezvous, const std::vector<FaultSpec>& faults,
                 TimelineBoard* board, const TimelineOptions& timeline, SimGroups* groups)
    : rank_(rank),
      world_(world),
      rendezvous_(rendezvous),
      board_(board),
      groups_(groups),
      gpus_per_node_(rendezvous.gpus_per_node()) {
  for (const auto& fault : faults) {
    if (fault.rank == rank) faults_.push_back(fault);
  }
  if (board_ != nullptr) timeline_ = &own_timeline_.emplace(world, timeline);
  level_ = link_level_of(world, node_count(world, gpus_per_node_));
}

SimComm::SimComm(SimComm& parent, SimGroup& group, int rank)
    : rank_(rank),
      world_(static_cast<int>(group.world_ranks.size())),
      rendezvous_(group.rendezvous),
      board_(&group.board),
      timeline_(parent.timeline_),
      timeline_calls_(parent.timeline_calls_),
      groups_(parent.groups_),
      group_id_(group.id),
      world_ranks_(group.world_ranks),
      gpus_per_node_(parent.gpus_per_node_) {
  group_nodes_ = nodes_spanned(world_ranks_, gpus_per_node_);
  level_ = link_level_of(world_, group_nodes_);
  count_in(parent);
  group_leader_ = *std::min_element(world_ranks_.begin(), world_ranks_.end());
}

std::unique_ptr<Comm> SimComm::split(int color) {
  ZL_CHECK(groups_ != nullptr, "rank {} cannot split: its SimComm was made without groups", rank_);
  int rank_in_group = 0;
  const std::vector<int> members = split_members(color, world_ranks_, &rank_in_group);
  SimGroup& group = groups_->join(group_id_, ++splits_, color, members);
  return std::unique_ptr<Comm>(new SimComm(*this, group, rank_in_group));
}

void SimComm::all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op) {
  run_call({.kind = CollectiveKind::AllReduce,
            .op = op,
            .dtype = dtype,
            .count = count,
            .send = data,
            .recv = data},
           false);
}

void SimComm::reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                             ReduceOp op) {
  run_call({.kind = CollectiveKind::ReduceScatter,
            .op = op,
            .dtype = dtype,
            .count = recv_count,
            .send = send,
            .recv = recv},
           false);
}

void SimComm::all_gather(const void* send, void* recv, std::size_t send_count, DType dtype) {
  run_call({.kind = CollectiveKind::AllGather,
            .dtype = dtype,
            .count = send_count,
            .send = send,
            .recv = recv},
           false);
}

void SimComm::broadcast(void* data, std::size_t count, DType dtype, int root) {
  run_call({.kind = CollectiveKind::Broadcast,
            .dtype = dtype,
            .count = count,
            .root = root,
            .send = data,
            .recv = data},
           false);
}

void SimComm::all_to_all(const void* send, void* recv, std::size_t count, DType dtype) {
  run_call({.kind = CollectiveKind::AllToAll,
            .dtype = dtype,
            .count = count,
            .send = send,
            .recv = recv},
           false);
}

void SimComm::barrier() {
  run_call({.kind = CollectiveKind::Barrier}, false);
}

CommHandle SimComm::all_reduce_async(void* data, std::size_t count, DType dtype, ReduceOp op) {
  return handle_of(run_call({.kind = CollectiveKind::AllReduce,
                             .op = op,
                             .dtype = dtype,
                             .count = count,
                             .send = data,
                             .recv = data},
                            true));
}

CommHandle SimComm::reduce_scatter_async(const void* send, void* recv, std::size_t recv_count,
                                         DType dtype, ReduceOp op) {
  return handle_of(run_call({.kind = CollectiveKind::ReduceScatter,
                             .op = op,
                             .dtype = dtype,
                             .count = recv_count,
                             .send = send,
                             .recv = recv},
                            true));
}

CommHandle SimComm::all_gather_async(const void* send, void* recv, std::size_t send_count,
                                     DType dtype) {
  return handle_of(run_call({.kind = CollectiveKind::AllGather,
                             .dtype = dtype,
                             .count = send_count,
                             .send = send,
                             .recv = recv},
                            true));
}

void SimComm::host_copy(HostCopy direction, std::int64_t bytes) {
  traffic().record_copy(direction, bytes);
  if (timeline_) timeline_->host_copy(direction, bytes);
}

void SimComm::disk_io(DiskIo direction, std::int64_t bytes, double ms) {
  traffic().record_disk(direction, bytes, ms);
  if (timeline_) timeline_->disk_io(direction, bytes);
}

std::int64_t SimComm::disk_io_started(DiskIo direction, std::int64_t bytes) {
  return timeline_ ? timeline_->disk_start(direction, bytes) : 0;
}

void SimComm::disk_io_waited(std::int64_t id) {
  if (timeline_ && id != 0) timeline_->disk_wait(id);
}

CommHandle SimComm::handle_of(std::int64_t call_number) {
  if (call_number == 0 || !timeline_) return {};
  return CommHandle([this, call_number] { timeline_->wait(call_number); });
}

std::optional<std::string> SimComm::unfired_fault() const {
  for (const auto& fault : faults_) {
    const std::int64_t made = calls_of_kind_[static_cast<std::size_t>(fault.collective)];
    if (made >= fault.nth) continue;
    return fmt::format("rank {}: fault {} never fired: the rank made {} {} calls", rank_,
                       to_string(fault), made, collective_name(fault.collective));
  }
  return std::nullopt;
}

bool SimComm::inject(const FaultSpec& fault, const CallDesc& call, std::int64_t nth) {
  const std::string where = fmt::format("injected fault at {} #{} (call #{})",
                                        collective_name(call.kind), nth, calls_posted_ + 1);
  switch (fault.kind) {
    case FaultKind::Throw:
      throw Error(where);
    case FaultKind::Skip:
      rendezvous_.note_fault(rank_, where + ": skipped the call");
      return false;
    case FaultKind::Slow: {
      // Twice the timeout, so the others surely give up first, whatever their lead.
      const auto late = 2 * rendezvous_.timeout();
      rendezvous_.note_fault(
          rank_, fmt::format("{}: held back for twice the {} ms collective timeout", where,
                             rendezvous_.timeout().count()));
      rendezvous_.sleep_unless_failed(late);
      return true;
    }
  }
  return true;
}

std::int64_t SimComm::run_call(const CallDesc& call, bool async) {
  const std::int64_t nth = ++calls_of_kind_[static_cast<std::size_t>(call.kind)];
  for (const auto& fault : faults_) {
    if (fault.collective == call.kind && fault.nth == nth && !inject(fault, call, nth)) return 0;
  }
  check_call_arguments(call, world_);  // this rank's own errors, before the call is posted
  // The rendezvous numbers this rank's calls 1, 2, ...: the ready time goes up under that number
  // before the call does, so every rank finds all W of them once the call is complete.
  const std::int64_t number = calls_posted_ + 1;
  if (timeline_) board_->publish(number, timeline_->before_call());
  calls_posted_ = rendezvous_.post(rank_, call);
  rendezvous_.wait(rank_, calls_posted_);
  CallInfo info = record_call(traffic(), level_, call, rank_, world_,
                              {world_ranks_.empty() ? 0 : group_nodes_, group_leader_});
  if (!timeline_) return calls_posted_;
  info.number = ++*timeline_calls_;
  timeline_->after_call(info, async, board_->start_ms(calls_posted_));
  return info.number;
}

RankTimeline* sim_timeline(Comm& comm) {
  auto* sim = dynamic_cast<SimComm*>(&comm);
  return sim != nullptr ? sim->timeline() : nullptr;
}

}  // namespace zl
