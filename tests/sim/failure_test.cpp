// failure_test.cpp — a mismatched collective, a rank that throws, a rank that returns early and
// a rank that never arrives each become a zl::Error naming the ranks involved, never a hang.
// Every test checks it finished well within a bound, so a hang fails instead of blocking.
#include <gtest/gtest.h>

#include <regex>
#include <stdexcept>
#include <thread>

#include "rendezvous.hpp"
#include "sim_test_support.hpp"
#include "support/fault_timing.hpp"

namespace zl::simtest {
namespace {

// Runs `call(comm)` as call #3 of every rank (after two barriers) on a world of 4 and checks that
// every rank, and run(), fail with a mismatch error that contains `expected`.
void expect_mismatch(const std::function<void(Comm&)>& call, const std::string& expected) {
  SimWorld sim(4);
  std::vector<std::string> messages(4);
  std::string error;
  const double seconds = seconds_taken([&] {
    error = run_error(sim, [&](Comm& comm) {
      try {
        comm.barrier();
        comm.barrier();
        call(comm);
      } catch (const Error& e) {
        messages[static_cast<std::size_t>(comm.rank())] = e.what();
        throw;
      }
    });
  });
  EXPECT_LT(seconds, kFaultBoundSeconds);
  EXPECT_TRUE(contains(error, expected));
  for (const auto& message : messages)
    EXPECT_EQ(message, messages[0]) << "every rank gets the same error";
  EXPECT_TRUE(contains(messages[0], expected));
}

TEST(SimFailures, mismatched_op_names_both_calls_and_ranks) {
  expect_mismatch(
      [](Comm& comm) {
        std::vector<float> data(100);
        if (comm.rank() == 2) {
          comm.all_gather(data.data(), data.data(), 25, DType::F32);
        } else {
          comm.all_reduce(data.data(), 100, DType::F32, ReduceOp::Sum);
        }
      },
      "collective mismatch at call #3: rank 0 called all_reduce(fp32, 100 elems, sum) but rank 2 "
      "called all_gather(fp32, 25 elems)");
}

TEST(SimFailures, mismatched_count_is_named) {
  expect_mismatch(
      [](Comm& comm) {
        std::vector<float> data(100);
        comm.all_reduce(data.data(), comm.rank() == 3 ? 99 : 100, DType::F32, ReduceOp::Sum);
      },
      "rank 0 called all_reduce(fp32, 100 elems, sum) but rank 3 called all_reduce(fp32, 99 elems, "
      "sum)");
}

TEST(SimFailures, mismatched_dtype_is_named) {
  expect_mismatch(
      [](Comm& comm) {
        std::vector<double> data(10);
        comm.all_reduce(data.data(), 10, comm.rank() == 1 ? DType::F64 : DType::F32, ReduceOp::Sum);
      },
      "rank 0 called all_reduce(fp32, 10 elems, sum) but rank 1 called all_reduce(fp64, 10 elems, "
      "sum)");
}

TEST(SimFailures, mismatched_reduce_op_is_named) {
  expect_mismatch(
      [](Comm& comm) {
        std::vector<float> data(8);
        comm.reduce_scatter(data.data(), data.data(), 2, DType::F32,
                            comm.rank() == 2 ? ReduceOp::Max : ReduceOp::Avg);
      },
      "rank 0 called reduce_scatter(fp32, 2 elems, avg) but rank 2 called reduce_scatter(fp32, 2 "
      "elems, max)");
}

TEST(SimFailures, mismatched_root_is_named) {
  expect_mismatch(
      [](Comm& comm) {
        std::vector<float> data(8);
        comm.broadcast(data.data(), 8, DType::F32, comm.rank() == 3 ? 1 : 0);
      },
      "rank 0 called broadcast(fp32, 8 elems, root 0) but rank 3 called broadcast(fp32, 8 elems, "
      "root 1)");
}

TEST(SimFailures, skipped_collective_is_a_mismatch) {
  expect_mismatch(
      [](Comm& comm) {
        std::vector<float> data(4);
        if (comm.rank() != 1) comm.all_reduce(data.data(), 4, DType::F32, ReduceOp::Sum);
        comm.barrier();
      },
      "rank 0 called all_reduce(fp32, 4 elems, sum) but rank 1 called barrier");
}

TEST(SimFailures, throwing_rank_fails_run_with_its_message) {
  SimWorld sim(4);  // default timeout (120 s): the other ranks must not rely on it
  std::vector<std::string> messages(4);
  std::string error;
  const double seconds = seconds_taken([&] {
    error = run_error(sim, [&](Comm& comm) {
      std::vector<float> data(10);
      try {
        comm.all_reduce(data.data(), 10, DType::F32, ReduceOp::Sum);
        comm.all_reduce(data.data(), 10, DType::F32, ReduceOp::Sum);
        if (comm.rank() == 1) throw Error("loss is NaN at step 2");
        comm.all_reduce(data.data(), 10, DType::F32, ReduceOp::Sum);
      } catch (const Error& e) {
        messages[static_cast<std::size_t>(comm.rank())] = e.what();
        throw;
      }
    });
  });
  EXPECT_LT(seconds, kFaultBoundSeconds);
  EXPECT_EQ(error, "rank 1: loss is NaN at step 2");
  EXPECT_EQ(
      messages[0],
      "rank 0 waits in call #3 all_reduce(fp32, 10 elems, sum) but rank 1 failed: loss is NaN "
      "at step 2");
  EXPECT_TRUE(contains(messages[3], "but rank 1 failed: loss is NaN at step 2"));
}

TEST(SimFailures, non_zl_exceptions_are_caught) {
  SimWorld sim(3);
  const auto body = [](Comm& comm) {
    comm.barrier();
    if (comm.rank() == 2) throw std::out_of_range("vector index 7 of 4");
    comm.barrier();
  };
  EXPECT_EQ(run_error(sim, body), "rank 2: vector index 7 of 4");
  const std::string error = run_error(sim, [](Comm& comm) {
    if (comm.rank() == 0) throw 42;
    comm.barrier();
  });
  EXPECT_EQ(error, "rank 0: threw an exception that is not a std::exception");
}

TEST(SimFailures, rank_failing_after_its_collectives_still_fails_run) {
  SimWorld sim(2);
  EXPECT_EQ(run_error(sim,
                      [](Comm& comm) {
                        comm.barrier();
                        if (comm.rank() == 1) throw Error("checkpoint write failed");
                      }),
            "rank 1: checkpoint write failed");
}

TEST(SimFailures, rank_returning_early_is_named) {
  SimWorld sim(3);
  std::string error;
  const double seconds = seconds_taken([&] {
    error = run_error(sim, [](Comm& comm) {
      std::vector<float> data(10);
      const int calls = comm.rank() == 1 ? 3 : 4;
      for (int i = 0; i < calls; ++i) comm.all_reduce(data.data(), 10, DType::F32, ReduceOp::Sum);
    });
  });
  EXPECT_LT(seconds, kFaultBoundSeconds);
  EXPECT_TRUE(contains(error,
                       "waits in call #4 all_reduce(fp32, 10 elems, sum) but rank 1 "
                       "returned after 3 collectives"));
}

TEST(SimFailures, rank_that_never_arrives_times_out) {
  SimWorld sim(4, SimOptions{.timeout = kFaultTimeout});
  std::string error;
  const double seconds = seconds_taken([&] {
    error = run_error(sim, [](Comm& comm) {
      comm.barrier();
      if (comm.rank() == 1 || comm.rank() == 3) std::this_thread::sleep_for(3 * kFaultTimeout);
      comm.barrier();
    });
  });
  EXPECT_LT(seconds, kFaultBoundSeconds);
  EXPECT_TRUE(contains(error, fmt::format("timeout after {} ms: rank ", kFaultTimeout.count())));
  EXPECT_TRUE(contains(error, " waits in call #2 barrier; ranks 1, 3 never arrived"));
  EXPECT_TRUE(error.starts_with("rank 0: ") || error.starts_with("rank 2: ")) << error;
}

// The clock of a wait starts once every rank's thread is running (sim_world.cpp marks each thread
// started before its body runs): a rank whose thread starts ten timeouts after another's call is
// late, not absent, and the call completes; the timeout then runs from that start (rank 1 posts a
// tenth of it later). Held at the rendezvous, with the late start made on purpose, so a busy
// machine's scheduling cannot decide it.
TEST(SimFailures, AWaitsClockStartsOnceEveryRanksThreadRuns) {
  constexpr auto kTimeout = std::chrono::milliseconds(100);
  Rendezvous rendezvous(2, kTimeout);
  std::string error;
  std::thread early([&] {
    try {
      rendezvous.mark_started(0);
      rendezvous.wait(0, rendezvous.post(0, CallDesc{}));
    } catch (const Error& e) {
      error = e.what();
    }
  });
  std::this_thread::sleep_for(10 * kTimeout);  // rank 1's thread is still being created
  rendezvous.mark_started(1);
  std::this_thread::sleep_for(kTimeout / 10);
  rendezvous.wait(1, rendezvous.post(1, CallDesc{}));
  early.join();
  EXPECT_EQ(error, "");
}

// ... while a rank that stalls inside the body still times the others out, naming the call.
TEST(SimFailures, one_ms_timeout_still_catches_a_stalled_rank) {
  SimWorld sim(4, SimOptions{.timeout = kShortestTimeout});
  std::string error;
  const double seconds = seconds_taken([&] {
    error = run_error(sim, [](Comm& comm) {
      if (comm.rank() == 2) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      float value = 1.0f;
      comm.all_reduce(&value, 1, DType::F32, ReduceOp::Sum);
    });
  });
  EXPECT_LT(seconds, kFaultBoundSeconds);
  EXPECT_TRUE(contains(error, fmt::format("timeout after {} ms: rank ", kShortestTimeout.count())))
      << error;
  EXPECT_TRUE(contains(error, " waits in call #1 all_reduce")) << error;
  // Rank 2 is named among the ranks that never arrived; under load a healthy rank can be later
  // than 1 ms too, and is then named beside it, but the rank that reports never is.
  const std::smatch absent = [&] {
    std::smatch match;
    std::regex_search(error, match,
                      std::regex("^rank (\\d): .*; ranks? ([\\d, ]+) never arrived$"));
    return match;
  }();
  ASSERT_EQ(absent.size(), 3u) << error;
  const std::string ranks = ", " + absent[2].str() + ",";
  EXPECT_TRUE(contains(ranks, ", 2,")) << error;
  EXPECT_FALSE(contains(ranks, ", " + absent[1].str() + ",")) << error;
}

TEST(SimFailures, invalid_arguments_fail_their_rank_first) {
  SimWorld sim(2);
  EXPECT_EQ(run_error(sim,
                      [](Comm& comm) {
                        std::int64_t value = 0;
                        comm.broadcast(&value, 1, DType::I64, comm.rank() == 0 ? 2 : 0);
                      }),
            "rank 0: broadcast root 2 is out of range for world size 2: use 0..1");
  const std::string error = run_error(sim, [](Comm& comm) {
    std::int64_t value = 0;
    comm.all_reduce(&value, 1, DType::I64, ReduceOp::Sum);
  });
  EXPECT_TRUE(contains(error, "all_reduce over int64 is not supported"));
}

TEST(SimFailures, world_of_one_reports_its_rank) {
  SimWorld sim(1);
  EXPECT_EQ(run_error(sim,
                      [](Comm& comm) {
                        comm.barrier();
                        throw Error("bad config");
                      }),
            "rank 0: bad config");
}

}  // namespace
}  // namespace zl::simtest
