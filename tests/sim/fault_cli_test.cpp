// fault_cli_test.cpp — runs the zerolab binary with --inject-fault, --collective-timeout-ms and
// --skip-nonfinite: every fault ends within a bound in one line naming the rank and the call, with
// a non-zero exit and no output files; bad specs name the bad part and the form; a huge learning
// rate stops the run, or with --skip-nonfinite every stage writes the reference's bytes.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <tuple>
#include <vector>

#include "support/cli_fixture.hpp"
#include "support/fault_timing.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;

/// A run of the binary and how long it took.
struct TimedResult : CommandResult {
  double seconds = 0.0;
};

class FaultCli : public test::CliTest {
 protected:
  static TimedResult zerolab(const std::string& args) {
    const auto start = std::chrono::steady_clock::now();
    TimedResult result{CliTest::zerolab(args)};
    result.seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return result;
  }

  // Every output flag, pointing into the test directory.
  std::string all_outputs() const {
    return fmt::format(" --metrics {} --summary {} --save-init {} --save-final {} --save-data {}",
                       (dir_ / "m.jsonl").string(), (dir_ / "s.json").string(),
                       (dir_ / "i.st").string(), (dir_ / "f.st").string(),
                       (dir_ / "d.st").string());
  }

  // Checks that `run` failed with exit code `exit_code`, one line on stderr containing `part`,
  // and left no files.
  void expect_failure(const CommandResult& run, int exit_code, const std::string& part,
                      const std::string& what) const {
    EXPECT_EQ(run.exit_code, exit_code) << what << ": " << run.err;
    EXPECT_NE(run.err.find(part), std::string::npos) << what << " printed: " << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1)
        << what << " printed: " << run.err;
    EXPECT_TRUE(files().empty()) << what << " left " << files().front();
  }
};

const std::string kShape =
    "--layers 3 --width 12 --in 5 --classes 4 --steps 4 --micro-batch 3 --quiet";
const std::string kSmall = kShape + " --lr 0.02";

TEST_F(FaultCli, EveryKindAtEveryStageFailsInOneLineNamingTheCall) {
  const std::pair<int, std::string> sites[] = {
      {0, "all_reduce:3"}, {1, "reduce_scatter:2"}, {2, "all_gather:4"}, {3, "all_gather:5"}};
  for (const auto& [stage, site] : sites) {
    for (const std::string kind : {"throw", "skip", "slow"}) {
      const std::string spec = fmt::format("rank=2,at={},kind={}", site, kind);
      const std::string args = fmt::format(
          "train --stage {} --world 4 {} --collective-timeout-ms {} --inject-fault {}{}", stage,
          kSmall, kFaultTimeout.count(), spec, all_outputs());
      const auto run = zerolab(args);
      const std::string collective = site.substr(0, site.find(':'));
      const std::string nth = site.substr(site.find(':') + 1);
      expect_failure(
          run, 1,
          fmt::format("zerolab: error: rank 2: injected fault at {} #{} (call #", collective, nth),
          args);
      EXPECT_LT(run.seconds, kFaultBoundSeconds) << args;
    }
  }
}

// The flag repeats; the fault that fires first is the one reported.
TEST_F(FaultCli, RepeatedFaultsReportTheFirstToFire) {
  const auto run = zerolab("train --stage 3 --world 4 " + kSmall +
                           " --inject-fault rank=0,at=reduce_scatter:3,kind=throw"
                           " --inject-fault rank=3,at=all_gather:2,kind=throw" +
                           all_outputs());
  expect_failure(run, 1, "zerolab: error: rank 3: injected fault at all_gather #2 (call #2)\n",
                 "two faults");
}

TEST_F(FaultCli, BadFaultFlagsNameTheBadPart) {
  const std::string form = "; expected rank=R,at=COLLECTIVE:N,kind=throw|skip|slow";
  const std::pair<std::string, std::string> cases[] = {
      {"rank=2,at=all_gather:5,kind=explode",
       R"(kind "explode" is unknown: use throw, skip or slow)" + form},
      {"rank=2,at=gather:5,kind=skip", R"(collective "gather" is unknown)"},
      {"rank=2,at=all_gather:-1,kind=skip", R"(call number "-1" is not 1 or more)" + form},
      {"rank=2,kind=skip", "at is missing" + form},
      {"rank=2;at=all_gather:1;kind=skip",
       R"(rank "2;at=all_gather:1;kind=skip" is not a rank number)"},
  };
  for (const auto& [spec, part] : cases) {
    const std::string args =
        "train --stage 3 --world 4 " + kSmall + " --inject-fault '" + spec + "'" + all_outputs();
    expect_failure(zerolab(args), 2, "zerolab: error: --inject-fault \"" + spec + "\": " + part,
                   args);
  }
  // Settings that cannot work are usage errors (exit 2) found before anything runs; a fault that
  // never fired is found by the run (exit 1).
  const std::tuple<std::string, std::string, int> run_errors[] = {
      {"--world 4 --inject-fault rank=4,at=all_gather:1,kind=throw",
       "--inject-fault rank=4,at=all_gather:1,kind=throw: rank 4 is outside the world of 4 ranks: "
       "use rank 0..3",
       2},
      {"--world 1 --inject-fault rank=0,at=all_gather:1,kind=skip",
       "kind=skip needs a world of 2 or more ranks", 2},
      {"--world 2 --engine reference --inject-fault rank=0,at=all_gather:1,kind=throw",
       "--inject-fault needs a distributed engine (--stage 0-3)", 2},
      {"--world 2 --stage 1 --inject-fault rank=0,at=broadcast:1,kind=throw",
       "rank 0: fault rank=0,at=broadcast:1,kind=throw never fired: the rank made 0 broadcast "
       "calls",
       1},
      {"--world 2 --collective-timeout-ms 0",
       "--collective-timeout-ms 0 is invalid: use 1000 or more", 2},
      {"--world 2 --collective-timeout-ms -5", "--collective-timeout-ms -5 is invalid", 2},
      {"--world 2 --collective-timeout-ms 999", "--collective-timeout-ms 999 is invalid", 2},
  };
  for (const auto& [flags, part, exit_code] : run_errors) {
    const std::string args = "train " + kSmall + " " + flags + all_outputs();
    expect_failure(zerolab(args), exit_code, part, args);
  }
  const std::string args = "train --collective-timeout-ms soon" + all_outputs();
  expect_failure(zerolab(args), 2, "--collective-timeout-ms", args);
}

TEST_F(FaultCli, HugeLearningRateStopsWithTheStepNamed) {
  for (const std::string engine : {"reference", "ddp", "zero1", "zero2", "zero3"}) {
    const std::string args =
        "train --engine " + engine + " --world 3 " + kShape + " --lr 1e30" + all_outputs();
    expect_failure(zerolab(args), 1,
                   "zerolab: error: step 2: gradient norm is nan: lower --lr or check the data; "
                   "--skip-nonfinite skips such steps\n",
                   args);
  }
}

TEST_F(FaultCli, SkipNonfiniteKeepsEveryStageByteIdenticalToTheReference) {
  const std::string huge = " --world 3 " + kShape + " --lr 1e30 --skip-nonfinite";
  const auto ref =
      zerolab("train --engine reference" + huge + " --save-final " + (dir_ / "ref.st").string() +
              " --metrics " + (dir_ / "m.jsonl").string());
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  EXPECT_NE(ref.out.find("skipped 3 of 4 steps: gradient norm not finite"), std::string::npos)
      << ref.out;
  const std::string metrics = slurp(dir_ / "m.jsonl");
  EXPECT_NE(metrics.find(R"("step": 1, )"), std::string::npos);
  EXPECT_NE(metrics.find(R"("skipped": false)"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find(R"("loss": null, "grad_norm": null, )"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find(R"("skipped": true)"), std::string::npos) << metrics;
  const std::string ref_bytes = slurp(dir_ / "ref.st");
  ASSERT_GT(ref_bytes.size(), 100u);
  for (const int stage : {0, 1, 2, 3}) {
    const fs::path file = dir_ / fmt::format("stage{}.st", stage);
    const auto run =
        zerolab(fmt::format("train --stage {}{} --save-final {}", stage, huge, file.string()));
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(slurp(file), ref_bytes) << "stage " << stage;
  }
}

}  // namespace
}  // namespace zl
