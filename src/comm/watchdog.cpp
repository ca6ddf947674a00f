// watchdog.cpp — poll, check the deadline, pause; abort once and throw.
#include "comm/watchdog.hpp"

#include <algorithm>
#include <thread>

#include "core/error.hpp"

namespace zl {

std::chrono::microseconds poll_pause(std::chrono::microseconds waited) {
  return std::min(waited / 8, kMaxPollPause);
}

void watch_collective(const std::function<CollectivePoll()>& poll,
                      const std::function<void()>& abort, const WatchedCall& watched) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = Clock::now();
  for (;;) {
    const CollectivePoll found = poll();
    if (found.state == PollState::Done) return;
    if (found.state == PollState::Failed) {
      abort();
      fail("rank {} in {}: {}: its communicator was aborted", watched.rank, watched.call,
           found.error);
    }
    const auto waited = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - start);
    if (waited > watched.timeout) {
      abort();
      fail(
          "timeout after {} ms: rank {} waits in {}; not every rank completed it (a rank stuck, "
          "gone or in another call): its communicator was aborted",
          watched.timeout.count(), watched.rank, watched.call);
    }
    const std::chrono::microseconds pause = poll_pause(waited);
    if (pause.count() == 0) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(pause);
    }
  }
}

}  // namespace zl
