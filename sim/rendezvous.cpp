// rendezvous.cpp — matching, completing and failing collective calls across the ranks' threads.
#include "rendezvous.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <exception>
#include <thread>
#include <utility>

#include "core/error.hpp"
#include "execute.hpp"

namespace zl {

namespace {

// A small call completes within microseconds of its last rank posting it. A waiting rank yields
// its core (to the ranks still to post) for up to kSpinYields turns within kSpinTime before it
// sleeps on the condition variable, whose wake-up costs a context switch and a turn at the mutex
// per waiting rank. The time cap keeps waiters of a large call from taking turns from the
// threads that carry it out.
constexpr int kSpinYields = 64;
constexpr auto kSpinTime = std::chrono::microseconds(50);

void spin_until_done(const std::atomic<bool>& done) {
  const auto give_up = std::chrono::steady_clock::now() + kSpinTime;
  for (int i = 0; i < kSpinYields && !done.load(std::memory_order_acquire); ++i) {
    if (std::chrono::steady_clock::now() >= give_up) return;
    std::this_thread::yield();
  }
}

}  // namespace

// The timeout is capped at a year so that now() + timeout cannot overflow the clock.
Rendezvous::Rendezvous(int world, std::chrono::milliseconds timeout, int gpus_per_node,
                       std::vector<int> world_ranks)
    : world_(world),
      timeout_(std::min(timeout, std::chrono::milliseconds(std::chrono::hours(24 * 365)))),
      gpus_per_node_(gpus_per_node),
      ranks_(static_cast<std::size_t>(world)),
      world_ranks_(std::move(world_ranks)) {}

int Rendezvous::named(int rank) const {
  return world_ranks_.empty() ? rank : world_ranks_[static_cast<std::size_t>(rank)];
}

std::string Rendezvous::call_name(std::int64_t call_number) const {
  if (world_ranks_.empty()) return fmt::format("call #{}", call_number);
  return fmt::format("call #{} of the group of ranks {}", call_number,
                     fmt::join(world_ranks_, ", "));
}

std::int64_t Rendezvous::post(int rank, CallDesc call) {
  const std::lock_guard lock(mutex_);
  RankState& self = ranks_[static_cast<std::size_t>(rank)];
  ZL_CHECK(self.fate != Fate::Failed, "rank {} called {} after it failed: {}", named(rank),
           describe(call), self.message);
  call.call_number = ++self.calls_posted;
  call.gpus_per_node = gpus_per_node_;
  Slot& meeting = slot(call.call_number);
  meeting.calls[static_cast<std::size_t>(rank)] = call;
  // A failed rank may have posted this call and then left with its buffers: never compute then.
  if (++meeting.posted == world_ && !any_failed()) complete(meeting, call.call_number);
  return call.call_number;
}

void Rendezvous::mark_started(int rank) {
  const std::lock_guard lock(mutex_);
  RankState& self = ranks_[static_cast<std::size_t>(rank)];
  if (self.started) return;
  self.started = true;
  if (++started_ == world_) {
    all_started_at_ = std::chrono::steady_clock::now();
    changed_.notify_all();
  }
}

void Rendezvous::wait(int rank, std::int64_t call_number) {
  std::unique_lock lock(mutex_);
  const auto entered = std::chrono::steady_clock::now();
  Slot& meeting = slot(call_number);
  if (!meeting.done) {  // the slot stays until this rank leaves it, so it can be read unlocked
    lock.unlock();
    spin_until_done(meeting.done);
    lock.lock();
  }
  while (!meeting.done) {
    if (auto blocker = blocked_by_peer(rank, call_number)) {
      fail_rank(rank, std::move(blocker->message), blocker->caused_by_peer);
    }
    if (started_ < world_) {  // the clock has not started: a rank's thread is still starting
      changed_.wait(lock);
      continue;
    }
    const auto deadline = std::max(entered, all_started_at_) + timeout_;
    if (std::chrono::steady_clock::now() >= deadline) {
      fail_rank(rank, timeout_message(rank, call_number), false);
    }
    changed_.wait_until(lock, deadline);
  }
  std::string error = meeting.error;
  if (++meeting.left == world_) slots_.erase(call_number);
  if (!error.empty()) fail_rank(rank, std::move(error), false);
}

void Rendezvous::mark_failed(int rank, std::string message, ErrorKind kind) {
  const std::lock_guard lock(mutex_);
  record_failure(rank, std::move(message), false);
  ranks_[static_cast<std::size_t>(rank)].kind = kind;
  changed_.notify_all();
}

void Rendezvous::mark_returned(int rank) {
  const std::lock_guard lock(mutex_);
  RankState& self = ranks_[static_cast<std::size_t>(rank)];
  if (self.fate == Fate::Running) self.fate = Fate::Returned;
  changed_.notify_all();
}

void Rendezvous::note_fault(int rank, std::string message) {
  const std::lock_guard lock(mutex_);
  if (!injected_) injected_ = fmt::format("rank {}: {}", rank, message);
}

void Rendezvous::sleep_unless_failed(std::chrono::milliseconds duration) {
  std::unique_lock lock(mutex_);
  changed_.wait_for(lock, duration, [this] { return any_failed(); });
}

std::optional<Error> Rendezvous::root_cause() const {
  const std::lock_guard lock(mutex_);
  const int rank = first_failed(-1);
  if (rank < 0) return std::nullopt;
  const RankState& state = ranks_[static_cast<std::size_t>(rank)];
  std::string cause = fmt::format("rank {}: {}", named(rank), state.message);
  if (injected_) cause = fmt::format("{}; then {}", *injected_, cause);
  return Error(cause, state.kind);
}

Rendezvous::Slot& Rendezvous::slot(std::int64_t call_number) {
  auto [it, inserted] = slots_.try_emplace(call_number);
  if (inserted) it->second.calls.resize(static_cast<std::size_t>(world_));
  return it->second;
}

// Called by the last rank to post: checks that the calls agree, then computes them for all.
void Rendezvous::complete(Slot& meeting, std::int64_t call_number) {
  const CallDesc& first = meeting.calls.front();
  for (int r = 1; r < world_ && meeting.error.empty(); ++r) {
    const CallDesc& other = meeting.calls[static_cast<std::size_t>(r)];
    if (same_signature(first, other)) continue;
    meeting.error =
        fmt::format("collective mismatch at {}: rank {} called {} but rank {} called {}",
                    call_name(call_number), named(0), describe(first), named(r), describe(other));
  }
  if (meeting.error.empty()) {
    try {
      execute_collective(meeting.calls);
    } catch (const std::exception& e) {
      meeting.error =
          fmt::format("{} {} failed: {}", call_name(call_number), describe(first), e.what());
    }
  }
  meeting.done = true;
  changed_.notify_all();
}

// Why call `call_number` can never complete for `rank`, or nullopt if it still can: a failed
// rank will never post again (and may have left this call), a returned rank has stopped posting.
std::optional<Rendezvous::Blocker> Rendezvous::blocked_by_peer(int rank,
                                                               std::int64_t call_number) const {
  const std::string waiting =
      fmt::format("rank {} waits in {} {}", named(rank), call_name(call_number),
                  describe(slots_.at(call_number).calls[static_cast<std::size_t>(rank)]));
  if (const int failed = first_failed(rank); failed >= 0) {
    const std::string& why = ranks_[static_cast<std::size_t>(failed)].message;
    return Blocker{fmt::format("{} but rank {} failed: {}", waiting, named(failed), why), true};
  }
  for (int r = 0; r < world_; ++r) {
    const RankState& state = ranks_[static_cast<std::size_t>(r)];
    if (state.fate == Fate::Returned && state.calls_posted < call_number) {
      return Blocker{fmt::format("{} but rank {} returned after {} collectives", waiting, named(r),
                                 state.calls_posted),
                     false};
    }
  }
  return std::nullopt;
}

// The failed rank (other than `except_rank`) that best explains a failure: one that failed by
// itself before one that failed because of another rank, then the earliest; -1 if none failed.
int Rendezvous::first_failed(int except_rank) const {
  int best = -1;
  for (int r = 0; r < world_; ++r) {
    const RankState& state = ranks_[static_cast<std::size_t>(r)];
    if (r == except_rank || state.fate != Fate::Failed) continue;
    if (best < 0) {
      best = r;
      continue;
    }
    const RankState& current = ranks_[static_cast<std::size_t>(best)];
    if (state.caused_by_peer != current.caused_by_peer) {
      if (!state.caused_by_peer) best = r;
    } else if (state.failure_index < current.failure_index) {
      best = r;
    }
  }
  return best;
}

std::string Rendezvous::timeout_message(int rank, std::int64_t call_number) const {
  std::vector<int> missing;
  for (int r = 0; r < world_; ++r) {
    if (ranks_[static_cast<std::size_t>(r)].calls_posted < call_number) missing.push_back(named(r));
  }
  return fmt::format("timeout after {} ms: rank {} waits in {} {}; {} {} never arrived",
                     timeout_.count(), named(rank), call_name(call_number),
                     describe(slots_.at(call_number).calls[static_cast<std::size_t>(rank)]),
                     missing.size() == 1 ? "rank" : "ranks", fmt::join(missing, ", "));
}

void Rendezvous::fail_rank(int rank, std::string message, bool caused_by_peer) {
  record_failure(rank, message, caused_by_peer);
  changed_.notify_all();
  throw Error(message);
}

void Rendezvous::record_failure(int rank, std::string message, bool caused_by_peer) {
  RankState& state = ranks_[static_cast<std::size_t>(rank)];
  if (state.fate == Fate::Failed) return;
  state.fate = Fate::Failed;
  state.message = std::move(message);
  state.caused_by_peer = caused_by_peer;
  state.failure_index = ++failures_;
}

bool Rendezvous::any_failed() const {
  for (const auto& state : ranks_) {
    if (state.fate == Fate::Failed) return true;
  }
  return false;
}

}  // namespace zl
