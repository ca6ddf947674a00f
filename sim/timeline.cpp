// timeline.cpp — the rank clocks, their replay, the board of ready times and the live timeline.
#include "timeline.hpp"

#include <fmt/format.h>
#include <time.h>

#include <algorithm>
#include <map>

#include "core/error.hpp"

namespace zl {

RankClocks::RankClocks(bool record_program, bool record_events)
    : record_program_(record_program), record_events_(record_events) {}

double RankClocks::ready_ms() const {
  return std::max(compute_ms_, comm_ms_);
}

void RankClocks::compute(double ms, std::string_view label) {
  ZL_CHECK(ms >= 0.0, "compute of {} ms is invalid: durations are >= 0", ms);
  if (ms == 0.0) return;
  push({.kind = TimelineOp::Kind::Compute, .compute_ms = ms, .label = std::string(label)});
  if (record_events_) {
    events_.push_back({.stream = Stream::Compute,
                       .name = std::string(label),
                       .start_ms = compute_ms_,
                       .dur_ms = ms,
                       .step = step_});
  }
  compute_ms_ += ms;
  compute_total_ms_ += ms;
}

void RankClocks::issue(const CallInfo& call, bool async, double start_ms, double dur_ms) {
  ZL_CHECK(start_ms >= ready_ms(), "call #{} starts at {} ms, before the rank is ready at {} ms",
           call.number, start_ms, ready_ms());
  push({.kind = TimelineOp::Kind::Issue, .call = call, .async = async});
  const double end_ms = start_ms + dur_ms;
  if (record_events_) {
    events_.push_back({.stream = Stream::Comm,
                       .name = std::string(collective_name(call.kind)),
                       .start_ms = start_ms,
                       .dur_ms = dur_ms,
                       .step = step_,
                       .call = call,
                       .async = async,
                       .issue_ms = compute_ms_});
  }
  busy_.push_back({start_ms, end_ms, dur_ms});
  comm_ms_ = end_ms;
  comm_total_ms_ += dur_ms;
  if (async) {
    pending_[call.number] = {call, end_ms};
  } else {
    join(call, end_ms);
  }
}

void RankClocks::wait(std::int64_t call_number) {
  const auto it = pending_.find(call_number);
  ZL_CHECK(it != pending_.end(), "wait on call #{}: no async call of that number is pending",
           call_number);
  const Pending pending = it->second;
  pending_.erase(it);
  push({.kind = TimelineOp::Kind::Wait, .call = pending.call});
  join(pending.call, pending.end_ms);
}

void RankClocks::host_copy(HostCopy direction, std::int64_t bytes, double dur_ms) {
  ZL_CHECK(dur_ms >= 0.0, "host copy of {} ms is invalid: durations are >= 0", dur_ms);
  push({.kind = TimelineOp::Kind::Copy, .copy = direction, .copy_bytes = bytes});
  block_for_copy(fmt::format("copy {}", host_copy_name(direction)), bytes, dur_ms);
}

void RankClocks::disk_io(DiskIo direction, std::int64_t bytes, double dur_ms) {
  ZL_CHECK(dur_ms >= 0.0, "disk read or write of {} ms is invalid: durations are >= 0", dur_ms);
  push({.kind = TimelineOp::Kind::Copy, .copy_bytes = bytes, .disk = true, .disk_io = direction});
  block_for_copy(direction == DiskIo::Read ? "disk read" : "disk write", bytes, dur_ms);
}

std::int64_t RankClocks::disk_start(DiskIo direction, std::int64_t bytes, double dur_ms) {
  ZL_CHECK(dur_ms >= 0.0, "disk read or write of {} ms is invalid: durations are >= 0", dur_ms);
  const std::int64_t id = ++disk_started_;
  push({.kind = TimelineOp::Kind::DiskStart,
        .copy_bytes = bytes,
        .disk = true,
        .disk_io = direction,
        .disk_id = id});
  const double start_ms = std::max(disk_ms_, compute_ms_);
  if (record_events_) {
    events_.push_back({.stream = Stream::Disk,
                       .name = direction == DiskIo::Read ? "disk read" : "disk write",
                       .start_ms = start_ms,
                       .dur_ms = dur_ms,
                       .step = step_,
                       .copy_bytes = bytes});
  }
  disk_ms_ = start_ms + dur_ms;
  disk_pending_[id] = disk_ms_;
  return id;
}

void RankClocks::disk_wait(std::int64_t id) {
  const auto it = disk_pending_.find(id);
  ZL_CHECK(it != disk_pending_.end(), "wait on disk read or write #{}: none of that id is pending",
           id);
  const double end_ms = it->second;
  disk_pending_.erase(it);
  push({.kind = TimelineOp::Kind::DiskWait, .disk_id = id});
  if (end_ms <= compute_ms_) return;
  if (record_events_) {
    events_.push_back({.stream = Stream::Compute,
                       .name = "wait disk",
                       .start_ms = compute_ms_,
                       .dur_ms = end_ms - compute_ms_,
                       .step = step_});
  }
  copy_total_ms_ += end_ms - compute_ms_;
  compute_ms_ = end_ms;
}

void RankClocks::block_for_copy(std::string name, std::int64_t bytes, double dur_ms) {
  if (record_events_) {
    events_.push_back({.stream = Stream::Host,
                       .name = std::move(name),
                       .start_ms = compute_ms_,
                       .dur_ms = dur_ms,
                       .step = step_,
                       .copy_bytes = bytes});
  }
  compute_ms_ += dur_ms;
  copy_total_ms_ += dur_ms;
}

// The compute stream waits from its clock to `end_ms`; the part of that wait covered by comm
// spans is exposed comm. A span wholly inside counts its own duration, so blocking calls alone
// give exposed == comm exactly.
void RankClocks::join(const CallInfo& call, double end_ms) {
  if (end_ms <= compute_ms_) return;
  double exposed_ms = 0.0;
  for (std::size_t i = first_busy_; i < busy_.size() && busy_[i].start_ms < end_ms; ++i) {
    const Busy& busy = busy_[i];
    const double from = std::max(busy.start_ms, compute_ms_);
    const double to = std::min(busy.end_ms, end_ms);
    if (from == busy.start_ms && to == busy.end_ms) {
      exposed_ms += busy.dur_ms;
    } else if (to > from) {
      exposed_ms += to - from;
    }
  }
  while (first_busy_ < busy_.size() && busy_[first_busy_].end_ms <= end_ms) ++first_busy_;
  if (first_busy_ > 1024) {  // keep the spans still ahead of the compute clock only
    busy_.erase(busy_.begin(), busy_.begin() + static_cast<std::ptrdiff_t>(first_busy_));
    first_busy_ = 0;
  }
  if (record_events_) {
    events_.push_back({.stream = Stream::Compute,
                       .name = fmt::format("wait {}", collective_name(call.kind)),
                       .start_ms = compute_ms_,
                       .dur_ms = end_ms - compute_ms_,
                       .step = step_,
                       .call = call,
                       .exposed_ms = exposed_ms});
  }
  exposed_total_ms_ += exposed_ms;
  compute_ms_ = end_ms;
}

void RankClocks::begin_step(std::int64_t step) {
  if (step_ >= 0) end_step();
  push({.kind = TimelineOp::Kind::BeginStep, .step = step});
  step_ = step;
  step_start_ = totals();
}

StepTimes RankClocks::end_step() {
  if (step_ < 0) return {};
  push({.kind = TimelineOp::Kind::EndStep});
  const StepTimes now = totals();
  const StepTimes times{.step = step_,
                        .start_ms = step_start_.step_ms,
                        .compute_ms = now.compute_ms - step_start_.compute_ms,
                        .comm_ms = now.comm_ms - step_start_.comm_ms,
                        .exposed_comm_ms = now.exposed_comm_ms - step_start_.exposed_comm_ms,
                        .copy_ms = now.copy_ms - step_start_.copy_ms,
                        .step_ms = now.step_ms - step_start_.step_ms};
  steps_.push_back(times);
  step_ = -1;
  return times;
}

StepTimes RankClocks::totals() const {
  return {.step = -1,
          .compute_ms = compute_total_ms_,
          .comm_ms = comm_total_ms_,
          .exposed_comm_ms = exposed_total_ms_,
          .copy_ms = copy_total_ms_,
          .step_ms = compute_ms_};
}

void RankClocks::push(TimelineOp op) {
  if (record_program_) program_.push_back(std::move(op));
}

StepTimes TimelineRecord::totals() const {
  StepTimes sum;
  for (const auto& step : steps) {
    sum.compute_ms += step.compute_ms;
    sum.comm_ms += step.comm_ms;
    sum.exposed_comm_ms += step.exposed_comm_ms;
    sum.copy_ms += step.copy_ms;
    sum.step_ms += step.step_ms;
  }
  return sum;
}

// Call by call in number order: every rank runs its program up to its next Issue, then the call
// starts at the latest ready time, as the board makes it live.
std::vector<TimelineRecord> replay(const std::vector<std::vector<TimelineOp>>& programs,
                                   const LinkPreset& link, const HostLinkPreset& host_link,
                                   const DiskLinkPreset& disk_link, int world, bool record_events,
                                   const NodeLinks& nodes) {
  const std::size_t ranks = programs.size();
  std::vector<RankClocks> clocks(ranks, RankClocks(false, record_events));
  std::vector<std::size_t> next(ranks, 0);
  auto run_to_issue = [&](std::size_t r) {
    const auto& program = programs[r];
    for (; next[r] < program.size(); ++next[r]) {
      const TimelineOp& op = program[next[r]];
      switch (op.kind) {
        case TimelineOp::Kind::Compute:
          clocks[r].compute(op.compute_ms, op.label);
          break;
        case TimelineOp::Kind::Wait:
          clocks[r].wait(op.call.number);
          break;
        case TimelineOp::Kind::Copy:
          if (op.disk) {
            clocks[r].disk_io(op.disk_io, op.copy_bytes, host_copy_ms(disk_link, op.copy_bytes));
          } else {
            clocks[r].host_copy(op.copy, op.copy_bytes, host_copy_ms(host_link, op.copy_bytes));
          }
          break;
        case TimelineOp::Kind::DiskStart:
          clocks[r].disk_start(op.disk_io, op.copy_bytes, host_copy_ms(disk_link, op.copy_bytes));
          break;
        case TimelineOp::Kind::DiskWait:
          clocks[r].disk_wait(op.disk_id);
          break;
        case TimelineOp::Kind::BeginStep:
          clocks[r].begin_step(op.step);
          break;
        case TimelineOp::Kind::EndStep:
          clocks[r].end_step();
          break;
        case TimelineOp::Kind::Issue:
          return true;
      }
    }
    return false;
  };
  // The world's calls are one group of every rank; a group's are told apart by their leader.
  const auto group_of = [](const CallInfo& call) {
    return call.group_ranks == 0 ? -1 : call.group_leader;
  };
  while (ranks > 0) {
    std::size_t issuing = 0;
    std::map<int, double> start_ms;  // by group: when its last rank is ready
    for (std::size_t r = 0; r < ranks; ++r) {
      if (!run_to_issue(r)) continue;
      ++issuing;
      double& start = start_ms[group_of(programs[r][next[r]].call)];
      start = std::max(start, clocks[r].ready_ms());
    }
    if (issuing == 0) break;
    ZL_CHECK(issuing == ranks, "replay: {} of {} ranks issue another call: the programs disagree",
             issuing, ranks);
    const CallInfo& first = programs[0][next[0]].call;
    for (std::size_t r = 0; r < ranks; ++r) {
      const TimelineOp& op = programs[r][next[r]];
      ZL_CHECK(op.call.number == first.number && op.call.kind == first.kind,
               "replay: rank {} issues call #{} {} but rank 0 call #{} {}", r, op.call.number,
               collective_name(op.call.kind), first.number, collective_name(first.kind));
      CallInfo call = op.call;
      const CollectivePlan plan =
          call.group_ranks == 0
              ? plan_collective(link, nodes, call.kind, call.buffer_elems, call.elem_bytes, world)
              : plan_group_collective(link, nodes, world, call.group_ranks, call.group_nodes,
                                      call.kind, call.buffer_elems, call.elem_bytes);
      call.hierarchical = plan.hierarchical;
      clocks[r].issue(call, op.async, start_ms.at(group_of(call)), plan.ms);
      ++next[r];
    }
  }
  std::vector<TimelineRecord> records;
  for (std::size_t r = 0; r < ranks; ++r) {
    records.push_back({.rank = static_cast<int>(r),
                       .steps = clocks[r].steps(),
                       .program = {},
                       .events = clocks[r].events()});
  }
  return records;
}

void TimelineBoard::publish(std::int64_t call_number, double ready_ms) {
  const std::lock_guard lock(mutex_);
  Entry& entry = entries_[call_number];
  entry.latest_ms = entry.published == 0 ? ready_ms : std::max(entry.latest_ms, ready_ms);
  ++entry.published;
}

double TimelineBoard::start_ms(std::int64_t call_number) {
  const std::lock_guard lock(mutex_);
  const auto it = entries_.find(call_number);
  ZL_CHECK(it != entries_.end() && it->second.published == world_,
           "timeline: call #{} completed before every rank published its ready time", call_number);
  const double latest_ms = it->second.latest_ms;
  if (++it->second.read == world_) entries_.erase(it);
  return latest_ms;
}

double thread_cpu_ms() {
  timespec now{};
  ZL_CHECK(clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now) == 0,
           "clock_gettime(CLOCK_THREAD_CPUTIME_ID) failed: the timeline needs a thread CPU clock");
  return static_cast<double>(now.tv_sec) * 1e3 + static_cast<double>(now.tv_nsec) / 1e6;
}

RankTimeline::RankTimeline(int world, TimelineOptions options)
    : world_(world),
      options_(std::move(options)),
      clocks_(options_.record_program, options_.record_events) {}

void RankTimeline::start() {
  mark_cpu_ms_ = thread_cpu_ms();
}

void RankTimeline::mark(std::string_view label) {
  const double now_ms = thread_cpu_ms();
  flush_cuts(label);
  clocks_.compute(std::max(0.0, now_ms - mark_cpu_ms_) * options_.compute_scale, label);
  mark_cpu_ms_ = now_ms;
}

void RankTimeline::discard() {
  flush_cuts("compute");
  mark_cpu_ms_ = thread_cpu_ms();
}

void RankTimeline::begin_step(std::int64_t step) {
  discard();
  clocks_.begin_step(step);
}

StepTimes RankTimeline::end_step() {
  mark("compute");
  return clocks_.end_step();
}

double RankTimeline::before_call() {
  mark("compute");
  return clocks_.ready_ms();
}

void RankTimeline::after_call(CallInfo call, bool async, double start_ms) {
  const CollectivePlan plan =
      call.group_ranks == 0
          ? plan_collective(options_.link, options_.nodes, call.kind, call.buffer_elems,
                            call.elem_bytes, world_)
          : plan_group_collective(options_.link, options_.nodes, world_, call.group_ranks,
                                  call.group_nodes, call.kind, call.buffer_elems, call.elem_bytes);
  call.hierarchical = plan.hierarchical;
  clocks_.issue(call, async, start_ms, plan.ms);
  mark_cpu_ms_ = thread_cpu_ms();
}

void RankTimeline::wait(std::int64_t call_number) {
  mark("compute");
  clocks_.wait(call_number);
}

void RankTimeline::cut(CutCopy cut) {
  const double now_ms = thread_cpu_ms();
  cut.compute_ms = std::max(0.0, now_ms - mark_cpu_ms_) * options_.compute_scale;
  cuts_.push_back(cut);
  mark_cpu_ms_ = now_ms;
}

void RankTimeline::host_copy(HostCopy direction, std::int64_t bytes) {
  cut({.compute_ms = 0.0, .direction = direction, .bytes = bytes});
}

void RankTimeline::disk_io(DiskIo direction, std::int64_t bytes) {
  cut({.compute_ms = 0.0,
       .direction = HostCopy::ToHost,
       .bytes = bytes,
       .disk = true,
       .disk_io = direction});
}

std::int64_t RankTimeline::disk_start(DiskIo direction, std::int64_t bytes) {
  const std::int64_t id = ++disk_started_;
  cut({.compute_ms = 0.0,
       .direction = HostCopy::ToHost,
       .bytes = bytes,
       .disk = true,
       .disk_io = direction,
       .disk_kind = CutCopy::Disk::Start,
       .disk_id = id});
  return id;
}

void RankTimeline::disk_wait(std::int64_t id) {
  cut({.compute_ms = 0.0,
       .direction = HostCopy::ToHost,
       .bytes = 0,
       .disk = true,
       .disk_kind = CutCopy::Disk::Wait,
       .disk_id = id});
}

void RankTimeline::flush_cuts(std::string_view label) {
  for (const CutCopy& cut : cuts_) {
    clocks_.compute(cut.compute_ms, label);
    const double disk_ms = host_copy_ms(options_.disk_link, cut.bytes);
    if (!cut.disk) {
      clocks_.host_copy(cut.direction, cut.bytes, host_copy_ms(options_.host_link, cut.bytes));
    } else if (cut.disk_kind == CutCopy::Disk::Blocking) {
      clocks_.disk_io(cut.disk_io, cut.bytes, disk_ms);
    } else if (cut.disk_kind == CutCopy::Disk::Start) {
      const std::int64_t id = clocks_.disk_start(cut.disk_io, cut.bytes, disk_ms);
      ZL_CHECK(id == cut.disk_id, "timeline: disk read or write #{} became #{}", cut.disk_id, id);
    } else {
      clocks_.disk_wait(cut.disk_id);
    }
  }
  cuts_.clear();
}

CallInfo record_call(TrafficLedger& ledger, LinkLevel level, const CallDesc& call, int rank,
                     int world, GroupPlace group) {
  const auto elem_bytes = static_cast<std::int64_t>(dtype_bytes(call.dtype));
  const std::int64_t buffer_elems = ring_buffer_elems(call, world);
  const RingVolume volume =
      ring_volume(call.kind, buffer_elems, elem_bytes, rank, world, call.root);
  ledger.record(call.kind, volume);
  ledger.record_level(level, volume.sent_bytes);
  const bool in_group = group.nodes > 0;
  return {.kind = call.kind,
          .buffer_elems = buffer_elems,
          .elem_bytes = elem_bytes,
          .sent_bytes = volume.sent_bytes,
          .wire_bytes = wire_bytes(call.kind, buffer_elems, elem_bytes, world),
          .group_ranks = in_group ? world : 0,
          .group_nodes = group.nodes,
          .group_leader = in_group ? group.leader : 0};
}

}  // namespace zl
