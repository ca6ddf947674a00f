// rendezvous.hpp — where the simulated ranks meet. Each collective call is posted under the
// rank's call number; the last rank to post call k checks that all W calls agree and computes
// them for everyone while the others wait. It also tracks each rank's fate (running, returned,
// failed) so a call that can never complete fails with an error naming the cause, never hangs.
// Posting and waiting are separate steps so async collectives can post now and wait later.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "call_desc.hpp"
#include "core/error.hpp"

namespace zl {

/// The meeting point of one SimWorld::run(). Thread-safe; one instance per run.
class Rendezvous {
 public:
  /// `timeout` bounds every wait(), counted from the wait's start or, if later, from when the last
  /// rank called mark_started(). Every call posted is stamped with `gpus_per_node`, the world's
  /// layout its reductions follow (CallDesc::gpus_per_node). A group's rendezvous (Comm::split)
  /// has `world_ranks`, the world rank of each of its ranks: its messages name ranks by those, and
  /// its calls as "call #N of the group of ranks ...".
  Rendezvous(int world, std::chrono::milliseconds timeout, int gpus_per_node = kOneNode,
             std::vector<int> world_ranks = {});

  /// Records that `rank`'s thread is running. Until every rank's is (or one failed), waits have no
  /// deadline: a thread still being created is late, not absent, however short the timeout.
  void mark_started(int rank);

  /// Posts `rank`'s next call and returns its call number (1, 2, ...). The buffers must stay
  /// valid until wait() returns. Throws zl::Error if this rank has already failed.
  std::int64_t post(int rank, CallDesc call);

  /// Blocks until `rank`'s call `call_number` is complete. Throws zl::Error, and marks the rank
  /// failed, if the calls disagree, if a rank it needs failed or returned, or on timeout (see the
  /// constructor).
  void wait(int rank, std::int64_t call_number);

  /// Records that `rank`'s body threw `message` (kept only if the rank had not failed yet).
  void mark_failed(int rank, std::string message, ErrorKind kind = ErrorKind::Runtime);

  /// Records that `rank`'s body returned.
  void mark_returned(int rank);

  /// Records that a fault was injected into `rank` as `message`, so the root cause can lead with
  /// it (the first note is kept). Faults that throw need no note: their error is the cause.
  void note_fault(int rank, std::string message);

  /// Sleeps for `duration`, or until any rank fails: a rank injected to be slow stops sleeping
  /// once the others have given up on it, as a launcher kills the stragglers of a failed job.
  void sleep_unless_failed(std::chrono::milliseconds duration);

  /// The timeout that bounds every wait().
  std::chrono::milliseconds timeout() const { return timeout_; }
  /// The layout every call is stamped with (CallDesc::gpus_per_node).
  int gpus_per_node() const { return gpus_per_node_; }

  /// "rank R: <message>" for the first rank that failed by itself (a mismatch, a timeout, an
  /// early return it waited for, or its own exception) rather than because another rank
  /// failed, with that failure's kind; nullopt if no rank failed. After an injected fault it
  /// reads "rank F: <fault>; then rank R: <message>".
  std::optional<Error> root_cause() const;

 private:
  enum class Fate : std::uint8_t { Running, Returned, Failed };

  struct RankState {
    Fate fate = Fate::Running;
    bool started = false;  // its thread called mark_started()
    std::int64_t calls_posted = 0;
    std::string message;
    ErrorKind kind = ErrorKind::Runtime;  // what its own error reported (mark_failed)
    /// Failed because another rank failed.
    bool caused_by_peer = false;
    /// Order in which ranks failed, to find the first.
    std::int64_t failure_index = 0;
  };

  struct Slot {
    std::vector<CallDesc> calls;  // calls[r].call_number == 0 until rank r posts
    int posted = 0;
    int left = 0;                    // ranks that saw it done and returned from wait()
    std::atomic<bool> done = false;  // set under the mutex; wait() also reads it while spinning
    std::string error;               // set with done when the calls disagree
  };

  /// Why a call can never complete.
  struct Blocker {
    std::string message;
    /// True when the blocking rank failed; false when it returned (then the waiter is the cause).
    bool caused_by_peer = false;
  };

  Slot& slot(std::int64_t call_number);
  void complete(Slot& slot, std::int64_t call_number);
  std::optional<Blocker> blocked_by_peer(int rank, std::int64_t call_number) const;
  int first_failed(int except_rank) const;
  std::string timeout_message(int rank, std::int64_t call_number) const;
  [[noreturn]] void fail_rank(int rank, std::string message, bool caused_by_peer);
  void record_failure(int rank, std::string message, bool caused_by_peer);
  bool any_failed() const;

  const int world_;
  const std::chrono::milliseconds timeout_;
  const int gpus_per_node_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<RankState> ranks_;
  std::map<std::int64_t, Slot> slots_;
  std::int64_t failures_ = 0;
  int started_ = 0;  // ranks whose thread called mark_started()
  std::chrono::steady_clock::time_point all_started_at_{};  // set when started_ reaches world_
  std::optional<std::string> injected_;  // "rank F: <fault>" of the first note_fault()
  std::vector<int> world_ranks_;         // a group's: rank r here is world rank world_ranks_[r]

  // Rank `rank` as messages name it: its world rank.
  int named(int rank) const;
  // "call #N", or for a group "call #N of the group of ranks a, b, ...".
  std::string call_name(std::int64_t call_number) const;
};

}  // namespace zl
