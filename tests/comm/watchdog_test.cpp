// watchdog_test.cpp — the wait that guards NCCL's collectives (comm/watchdog.hpp), with fake polls
// and aborts on the CPU: a call that completes returns without an abort; an asynchronous error
// aborts once and names the error; a call past the timeout aborts once and fails with the sim's
// timeout message shape; the polls pause (no busy loop) yet notice completion soon.
#include "comm/watchdog.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <regex>
#include <string>

#include "call_desc.hpp"
#include "core/error.hpp"
#include "sim_world.hpp"

namespace zl {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// The call NcclComm names for its 4th collective, an all_reduce of 100 floats.
WatchedCall all_reduce_call(milliseconds timeout) {
  const CallDesc call{.kind = CollectiveKind::AllReduce, .dtype = DType::F32, .count = 100};
  return {.rank = 1, .call = "call #4 " + describe(call), .timeout = timeout};
}

// What a watched wait threw ("(no error)" when it returned), and the aborts it made.
struct Outcome {
  std::string error = "(no error)";
  int aborts = 0;
  int polls = 0;
  double seconds = 0.0;
};

Outcome watch(const std::function<CollectivePoll(int poll, double seconds)>& poll,
              milliseconds timeout) {
  Outcome outcome;
  const Clock::time_point start = Clock::now();
  const auto since_start = [&] {
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  try {
    watch_collective([&] { return poll(outcome.polls++, since_start()); },
                     [&] { ++outcome.aborts; }, all_reduce_call(timeout));
  } catch (const Error& error) {
    outcome.error = error.what();
  }
  outcome.seconds = since_start();
  return outcome;
}

TEST(Watchdog, ACallThatCompletesReturnsWithoutAnAbort) {
  const Outcome outcome =
      watch([](int poll,
               double) { return CollectivePoll{poll < 5 ? PollState::Pending : PollState::Done}; },
            milliseconds(10000));
  EXPECT_EQ(outcome.error, "(no error)");
  EXPECT_EQ(outcome.aborts, 0);
  EXPECT_EQ(outcome.polls, 6);
}

TEST(Watchdog, AnAsynchronousErrorAbortsOnceAndNamesTheError) {
  const Outcome outcome = watch(
      [](int poll, double) {
        if (poll < 3) return CollectivePoll{PollState::Pending};
        return CollectivePoll{PollState::Failed,
                              "ncclCommGetAsyncError: remote process exited or there was a "
                              "network error"};
      },
      milliseconds(10000));
  EXPECT_EQ(outcome.aborts, 1);
  EXPECT_EQ(outcome.polls, 4);  // no poll after the error
  EXPECT_EQ(outcome.error,
            "rank 1 in call #4 all_reduce(fp32, 100 elems, sum): ncclCommGetAsyncError: remote "
            "process exited or there was a network error: its communicator was aborted");
}

// The sim's and the watchdog's timeouts read alike: "timeout after T ms: rank R waits in call #N
// <call>; <who is missing>".
const std::regex kTimeoutShape(
    R"(timeout after (\d+) ms: rank (\d+) waits in call #(\d+) (all_reduce\(fp32, 100 elems, sum\)); [^\n]+)");

TEST(Watchdog, PastTheTimeoutItAbortsOnceWithTheSimsMessageShape) {
  const Outcome outcome =
      watch([](int, double) { return CollectivePoll{PollState::Pending}; }, milliseconds(50));
  EXPECT_EQ(outcome.aborts, 1);
  EXPECT_GE(outcome.seconds, 0.05);
  EXPECT_LT(outcome.seconds, 5.0);
  EXPECT_EQ(outcome.error,
            "timeout after 50 ms: rank 1 waits in call #4 all_reduce(fp32, 100 elems, sum); not "
            "every rank completed it (a rank stuck, gone or in another call): its communicator "
            "was aborted");
  std::smatch watchdog;
  ASSERT_TRUE(std::regex_match(outcome.error, watchdog, kTimeoutShape)) << outcome.error;

  // The sim's own timeout for the same call: rank 0 waits for a rank 1 that never calls.
  std::string sim_error;
  try {
    SimWorld(2, SimOptions{.timeout = milliseconds(50)}).run([](Comm& comm) {
      std::vector<float> data(100);
      if (comm.rank() == 0) comm.all_reduce(data.data(), data.size(), DType::F32, ReduceOp::Sum);
      if (comm.rank() == 1) std::this_thread::sleep_for(milliseconds(500));
    });
  } catch (const Error& error) {
    sim_error = error.what();
  }
  const std::size_t at = sim_error.find("timeout after");
  ASSERT_NE(at, std::string::npos) << sim_error;
  std::smatch sim;
  const std::string sim_timeout = sim_error.substr(at);
  ASSERT_TRUE(std::regex_match(sim_timeout, sim, kTimeoutShape)) << sim_timeout;
  EXPECT_EQ(sim[1], watchdog[1]);  // the same timeout, and the same call named the same way
  EXPECT_EQ(sim[4], watchdog[4]);
}

TEST(Watchdog, PollsPauseWithoutABusyLoopAndNoticeCompletionSoon) {
  // Pauses: a yield at first, then an eighth of the wait, at most kMaxPollPause.
  using std::chrono::microseconds;
  EXPECT_EQ(poll_pause(microseconds(0)), microseconds(0));
  EXPECT_EQ(poll_pause(microseconds(7)), microseconds(0));
  EXPECT_EQ(poll_pause(microseconds(800)), microseconds(100));
  EXPECT_EQ(poll_pause(milliseconds(8)), kMaxPollPause);
  EXPECT_EQ(poll_pause(std::chrono::seconds(100)), kMaxPollPause);
  // A call that completes after 300 ms: about one poll per millisecond, not a spin of millions,
  // and the wait ends soon after the completion (the pauses above bound it to about 1 ms; the
  // margin is for a loaded or sanitized machine, where a sleep can overrun by tens of ms).
  const Outcome outcome = watch(
      [](int, double seconds) {
        return CollectivePoll{seconds < 0.3 ? PollState::Pending : PollState::Done};
      },
      milliseconds(10000));
  EXPECT_EQ(outcome.aborts, 0);
  EXPECT_GT(outcome.polls, 20);
  EXPECT_LT(outcome.polls, 1000);
  EXPECT_LT(outcome.seconds, 0.3 + 0.2);
}

}  // namespace
}  // namespace zl
