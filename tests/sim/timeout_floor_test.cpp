// timeout_floor_test.cpp — the shortest collective timeout a run accepts never fails a healthy
// run: 100 ZeRO-3 trainings of 8 ranks in a row at that timeout, on a machine loaded by two more
// threads that spin beside them, all complete; a timeout below the floor is refused before the
// run starts.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "core/error.hpp"
#include "support/small_config.hpp"

namespace zl {
namespace {

// Two threads that keep two cores busy for the scope's life.
class BusyCores {
 public:
  BusyCores() {
    for (int i = 0; i < 2; ++i) {
      threads_.emplace_back([this] {
        std::uint64_t spins = 0;
        while (!stop_.load(std::memory_order_relaxed)) spins = spins * 3 + 1;
        sink_.fetch_add(spins, std::memory_order_relaxed);
      });
    }
  }
  ~BusyCores() { stop_ = true; }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<std::uint64_t> sink_{0};
  std::vector<std::jthread> threads_;  // joined before stop_ and sink_ go (declared last)
};

TEST(TimeoutFloor, HealthyEightRankRunsAtTheShortestTimeoutAllCompleteOnALoadedMachine) {
  TrainConfig config = small_config();
  config.engine = EngineKind::Zero3;
  config.world = 8;
  config.collective_timeout = kMinCollectiveTimeout;
  const BusyCores busy;
  constexpr int kRuns = 100;
  int failed = 0;
  std::string first_error;
  for (int run = 0; run < kRuns; ++run) {
    try {
      train(config);
    } catch (const Error& error) {
      if (failed++ == 0) first_error = error.what();
    }
  }
  EXPECT_EQ(failed, 0) << failed << " of " << kRuns << " healthy runs failed; the first: "
                       << first_error;
}

TEST(TimeoutFloor, ATimeoutBelowTheFloorIsRefusedBeforeTheRun) {
  TrainConfig config = small_config();
  config.engine = EngineKind::Zero3;
  config.collective_timeout = kMinCollectiveTimeout - std::chrono::milliseconds(1);
  try {
    train(config);
    ADD_FAILURE() << "a " << config.collective_timeout.count() << " ms timeout was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()),
              "--collective-timeout-ms 999 is invalid: use 1000 or more (a healthy rank waits for "
              "its peers' compute, and on a loaded machine for a core)");
  }
}

}  // namespace
}  // namespace zl
