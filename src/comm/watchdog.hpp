// watchdog.hpp — the host's wait for a collective that has no timeout of its own (NCCL's), as
// PyTorch's ProcessGroupNCCL watchdog guards it: poll the call's completion and the communicator's
// asynchronous error, and at an error or past the collective timeout abort the communicator once
// and fail with the message shape of the sim's and MPI's timeouts ("timeout after T ms: rank R
// waits in call #N ...; ..."). Backend-free: the backend passes its poll and its abort, so the
// deadline, the pacing and the messages are tested on the CPU with fakes.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace zl {

/// What one poll of a collective found.
enum class PollState {
  Pending,  ///< still running
  Done,     ///< complete: its output may be read
  Failed,   ///< the backend reported an error (CollectivePoll::error says which)
};

/// One poll's answer.
struct CollectivePoll {
  PollState state = PollState::Pending;  ///< pending, done or failed
  std::string error{};                   ///< Failed: the backend's error in words
};

/// The call a watchdog guards, as its messages name it.
struct WatchedCall {
  int rank = 0;      ///< the rank that waits
  std::string call;  ///< "call #N <describe(call)>", as the sim names it (sim/call_desc.hpp)
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};  ///< the collective timeout
};

/// Waits for `watched` by calling `poll` until it is Done, pausing between polls (poll_pause()).
/// When a poll is Failed, or the call is still Pending `watched.timeout` after the wait began,
/// calls `abort` (exactly once) and throws zl::Error in one line: "timeout after T ms: rank R
/// waits in call #N ...; not every rank completed it (a rank stuck, gone or in another call): its
/// communicator was aborted", or "rank R in call #N ...: <error>: its communicator was aborted".
void watch_collective(const std::function<CollectivePoll()>& poll,
                      const std::function<void()>& abort, const WatchedCall& watched);

/// The longest pause between two polls.
inline constexpr std::chrono::microseconds kMaxPollPause{1000};

/// How long the watchdog pauses after a poll that found the call pending, `waited` into the wait:
/// a yield (zero) for the first 8 us, where most calls end, then an eighth of the time waited, at
/// most kMaxPollPause. So a wait ends at most about 1/8 of its length (and 1 ms) after its call,
/// and a long wait wakes the host about once per millisecond, not in a busy loop.
std::chrono::microseconds poll_pause(std::chrono::microseconds waited);

}  // namespace zl
