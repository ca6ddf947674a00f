// 09_faults.cpp — what a real job does when one rank takes a different path: it hangs, every
// other rank waiting forever in a collective. The simulator turns each such case into one error
// that names the rank and the call, within the collective timeout, with every thread ended.
#include <fmt/format.h>

#include <chrono>
#include <regex>
#include <string>

#include "lesson_support.hpp"

using namespace zl;
using namespace zl::lessons;

namespace {

constexpr std::string_view kWhy =
    "Collectives are a contract: every rank makes the same calls in the same order. In ZeRO-3 a\n"
    "rank that skips one unit's all_gather (a data-dependent branch, an early return) leaves the\n"
    "others blocked in theirs: on NCCL the job hangs until a watchdog kills it, with no word on\n"
    "who diverged. The simulator posts every call at a rendezvous keyed by its number, checks\n"
    "that all ranks agree, and gives every wait a timeout.";

struct Case {
  std::string_view title;
  std::string_view spec;
  std::string_view what;
};

constexpr Case kCases[] = {
    {"a rank throws", "rank=2,at=all_gather:5,kind=throw",
     "Rank 2 fails inside its 5th all_gather. The others are told who failed instead of waiting."},
    {"a rank skips a call", "rank=2,at=all_gather:5,kind=skip",
     "Rank 2 leaves its 5th all_gather out, so its next call is a reduce_scatter while the others\n"
     "are still in the all_gather: the rendezvous sees two different calls under one number."},
    {"a rank is late", "rank=2,at=all_gather:5,kind=slow",
     "Rank 2 arrives after the others have waited the whole timeout (one second here)."},
};

// Which of the waiting ranks notices first depends on the threads, so the lesson shows that
// rank as "another rank" (the zerolab command prints its number) and its output never varies.
std::string as_shown(const std::string& error) {
  static const std::regex observer(R"(then rank \d+: )");
  static const std::regex waiter(R"(: rank \d+ waits in )");
  return std::regex_replace(std::regex_replace(error, observer, "then another rank: "), waiter,
                            ": a rank waits in ");
}

}  // namespace

int main(int argc, char** argv) {
  // Rank 2 is the faulty one: three ranks at least. The model's three layers give ZeRO-3 the
  // all_gather #5 every fault below names.
  const LessonSizes defaults{.world = 4, .min_world = 3, .rows = 4, .seed = 0};
  return run_lesson(
      argc, argv, "Lesson 09: a divergent rank becomes an error, not a hang", defaults,
      [](const LessonFlags& flags) {
        heading("Lesson 09: faults");
        fmt::print("{}\n", kWhy);
        bool ok = true;
        for (const Case& c : kCases) {
          pause(flags, fmt::format("for: {}", c.title));
          TrainConfig base;
          base.mlp = {.layers = 3, .width = 32, .in = 8, .classes = 4};
          base.engine = EngineKind::Zero3;
          base.steps = 2;
          TrainConfig config = sized(base, flags);
          heading(fmt::format("ZeRO-3 on {} ranks: {}", config.world, c.title));
          fmt::print("--inject-fault {}\n{}\n\n", c.spec, c.what);
          config.collective_timeout = std::chrono::milliseconds(1000);
          config.faults = {parse_fault_spec(c.spec)};
          const auto start = std::chrono::steady_clock::now();
          std::string error;
          try {
            train(config);
          } catch (const Error& e) {
            error = e.what();
          }
          const double seconds =
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          fmt::print("error: {}\n", error.empty() ? "(none: the run finished)" : as_shown(error));
          const bool named = error.starts_with("rank 2: injected fault at all_gather #5");
          const bool bounded = seconds < 5.0;
          fmt::print("{}: one error naming rank 2 and the call, {} s after the start\n\n",
                     named && bounded ? "ok" : "UNEXPECTED", bounded ? "within 5" : "more than 5");
          ok = ok && named && bounded;
        }
        fmt::print(
            "Every rank's thread has ended: the run returned the error instead of hanging.\n");
        return ok ? 0 : 1;
      });
}
