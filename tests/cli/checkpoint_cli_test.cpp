// checkpoint_cli_test.cpp — checkpoints through the zerolab binary under kills and contention:
// a restart after a kill between a step's two commits makes progress, one run owns a folder and
// no step is saved twice, a run killed anywhere and restarted in a loop ends bitwise the
// uninterrupted run, a finished run restarted trains nothing, and a kill while saving leaves the
// last checkpoint loadable.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <string>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "ckpt/checkpoint_folder.hpp"
#include "support/cli_fixture.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;
using test::CliTest;
using test::kSmallShape;

// A kill between a step's manifest and `latest` leaves `latest` one step behind, with the
// temporaries of the cut save beside it. A restart that resumes from and saves to the folder
// takes the newest committed step, saying so, removes the temporaries, and ends bitwise where an
// uninterrupted run ends (it used to train one step and fail: "already committed").
TEST_F(CliTest, ARestartAfterAKillBetweenTheTwoCommitsMakesProgress) {
  const fs::path ck = dir_ / "ck";
  const std::string args = "train --stage 2 --world 2 " + kSmallShape;
  ASSERT_EQ(zerolab(args + " --steps 4 --checkpoint-every 2 --checkpoint-dir " + ck.string())
                .exit_code,
            0);
  std::ofstream(ck / "latest") << "step-00000002\n";
  std::ofstream(ck / "latest.tmp.777") << "step-0000";
  std::ofstream(ck / "step-00000004" / "rank-1.safetensors.tmp.777") << "partial";
  for (int restart = 0; restart < 2; ++restart) {  // and again: every restart makes progress
    const auto resumed = zerolab(fmt::format("{} --steps {} --resume {} --checkpoint-dir {} "
                                             "--save-final {}",
                                             args, 6 + 2 * restart, ck.string(), ck.string(),
                                             (dir_ / "resumed.st").string()));
    ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
    // The first restart says it passed over `latest`; the second finds `latest` moved along.
    const std::string skipped = fmt::format(
        "zerolab: resume: {} names step-00000002, but step-00000004 is the newest committed step: "
        "resuming from {}\n",
        (ck / "latest").string(), (ck / "step-00000004").string());
    EXPECT_EQ(resumed.err, restart == 0 ? skipped : "") << restart;
  }
  EXPECT_EQ(read_manifest(ck).step, 8);
  EXPECT_FALSE(fs::exists(ck / "latest.tmp.777"));
  EXPECT_FALSE(fs::exists(ck / "step-00000004" / "rank-1.safetensors.tmp.777"));
  const auto whole =
      zerolab(args + " --steps 8 --save-final " + (dir_ / "whole.st").string());
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_EQ(slurp(dir_ / "resumed.st"), slurp(dir_ / "whole.st"));
}

// One run owns a checkpoint folder: a second fails at its start, in one line, writing nothing;
// and no run saves a step the folder already has committed.
TEST_F(CliTest, ACheckpointFolderHasOneRunAndNoStepIsSavedTwice) {
  const fs::path ck = dir_ / "ck";
  const std::string args = "train --stage 1 --world 2 " + kSmallShape + " --checkpoint-every 2";
  ASSERT_EQ(zerolab(args + " --steps 4 --checkpoint-dir " + ck.string()).exit_code, 0);
  const auto listing = [&] {
    std::vector<std::string> names;
    for (const auto& entry : fs::recursive_directory_iterator(ck))
      names.push_back(entry.path().string() + " " + std::to_string(entry.is_regular_file()
                                                                        ? fs::file_size(entry)
                                                                        : 0));
    std::ranges::sort(names);
    return names;
  };
  const auto before = listing();
  {
    const int fd = ::open((ck / ".lock").c_str(), O_RDWR);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::flock(fd, LOCK_EX), 0);  // another run holds the folder
    const auto second = zerolab(args + " --steps 6 --resume " + ck.string() +
                                " --checkpoint-dir " + ck.string());
    ::close(fd);
    EXPECT_NE(second.exit_code, 0);
    EXPECT_NE(second.err.find("checkpoint folder " + ck.string() +
                              " is in use by another run: wait for it to end or save to another "
                              "folder"),
              std::string::npos)
        << second.err;
    EXPECT_EQ(std::count(second.err.begin(), second.err.end(), '\n'), 1) << second.err;
  }
  EXPECT_EQ(listing(), before);
  for (const std::string& resume :
       {std::string(), " --resume " + (ck / "step-00000002").string()}) {
    const auto again = zerolab(args + " --steps 6 --checkpoint-dir " + ck.string() + resume);
    EXPECT_NE(again.exit_code, 0);
    EXPECT_NE(again.err.find(ck.string() + " already holds committed step 4, after this run's "
                                           "start"),
              std::string::npos)
        << again.err;
    EXPECT_EQ(listing(), before);
  }
}

// Kill anywhere, restart in a loop: a run that resumes from and saves to one folder, killed at
// many points of its steps and saves (the kernel's SIGKILL, so nothing is cleaned up on the way
// out), ends bitwise where an uninterrupted run ends, and every restart makes progress.
TEST_F(CliTest, KilledAnywhereAndRestartedInALoopEndsBitwiseTheUninterruptedRun) {
  const fs::path ck = dir_ / "ck";
  const std::string run_args =
      "train --stage 2 --world 4 --layers 4 --width 192 --in 16 --classes 8 --micro-batch 4 "
      "--quiet --steps 300";
  const std::string args = run_args + " --checkpoint-every 1 --checkpoint-dir " + ck.string() +
                           " --save-final " + (dir_ / "looped.st").string();
  const auto resume = [&] {
    return committed_steps(ck).empty() ? std::string() : " --resume " + ck.string();
  };
  std::int64_t last_step = 0;
  int kills = 0;
  bool finished = false;
  // Kills 0.2 s in, 0.05 s later each time (points spread over steps and saves), and twice as late
  // after a run that committed nothing new (a slow, sanitized or loaded machine).
  double kill_after_s = 0.2;
  for (int attempt = 0; attempt < 8 && !finished; ++attempt) {
    const auto run = zerolab(args + resume(), fmt::format("timeout -s KILL {} ", kill_after_s));
    finished = run.exit_code == 0;  // it ended before the kill
    if (finished) break;
    ++kills;
    const std::vector<std::int64_t> steps = committed_steps(ck);
    const std::int64_t newest = steps.empty() ? 0 : steps.back();
    EXPECT_GE(newest, last_step);  // nothing committed is lost
    kill_after_s = newest > last_step ? kill_after_s + 0.05 : 2 * kill_after_s;
    last_step = newest;
  }
  EXPECT_GE(kills, 4);
  EXPECT_GT(last_step, 0);
  if (!finished) {
    const auto last = zerolab(args + resume());
    ASSERT_EQ(last.exit_code, 0) << last.err;
  }
  EXPECT_EQ(read_manifest(ck).step, 300);
  const auto whole = zerolab(run_args + " --save-final " + (dir_ / "whole.st").string());
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_EQ(slurp(dir_ / "looped.st"), slurp(dir_ / "whole.st"));
}

// A run killed after its last save and before its exit is finished: restarting it trains nothing
// and writes --save-final from the last checkpoint, the uninterrupted run's file; a per-step
// output it cannot fill is refused in one line, and nothing is written.
TEST_F(CliTest, AFinishedRunRestartedWritesItsFinalFileAndTrainsNothing) {
  const fs::path ck = dir_ / "ck";
  const std::string args = "train --stage 2 --world 2 --steps 3 " + kSmallShape;
  ASSERT_EQ(zerolab(args + " --checkpoint-dir " + ck.string() + " --save-final " +
                    (dir_ / "whole.st").string())
                .exit_code,
            0);
  const auto again = zerolab(args + " --checkpoint-dir " + ck.string() + " --resume " +
                             ck.string() + " --save-final " + (dir_ / "again.st").string());
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out,
            fmt::format("no steps to run: {} is at step 3, where --steps 3 ends\n", ck.string()));
  EXPECT_EQ(slurp(dir_ / "again.st"), slurp(dir_ / "whole.st"));
  EXPECT_EQ(committed_steps(ck), std::vector<std::int64_t>{3});
  const auto summary =
      zerolab(args + " --resume " + ck.string() + " --summary " + (dir_ / "s.json").string());
  EXPECT_EQ(summary.exit_code, 2);
  EXPECT_EQ(summary.err,
            fmt::format("zerolab: error: --summary has no steps to report: {} is at step 3, where "
                        "--steps 3 ends; give --steps more than 3, or leave --summary out\n",
                        ck.string()));
  EXPECT_FALSE(fs::exists(dir_ / "s.json"));
}

// A run killed at any moment, also while it saves, leaves the last committed checkpoint intact:
// `latest` names a step whose manifest and rank files all verify, and training resumes from it.
TEST_F(CliTest, KilledWhileSavingLeavesTheLastCheckpointLoadable) {
  const std::string train_args =
      "train --stage 2 --world 4 --layers 4 --width 192 --in 16 --classes 8 --micro-batch 4 "
      "--quiet";
  int checked = 0;
  for (const double kill_after_s : {0.4, 0.6, 0.8, 1.0, 1.2}) {
    const fs::path dir = dir_ / fmt::format("ck{}", checked);
    const auto run =
        zerolab(fmt::format("{} --steps 100000 --checkpoint-every 1 --checkpoint-dir {}",
                            train_args, dir.string()),
                fmt::format("timeout -s KILL {} ", kill_after_s));
    EXPECT_NE(run.exit_code, 0);                   // killed
    if (!fs::exists(dir / "latest")) continue;     // killed before the first commit
    const Manifest manifest = read_manifest(dir);  // throws if anything does not verify
    EXPECT_GE(manifest.step, 1);
    const auto resumed = zerolab(
        fmt::format("{} --steps {} --resume {}", train_args, manifest.step + 1, dir.string()));
    EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
    ++checked;
  }
  EXPECT_GE(checked, 3);  // most kills land after the first save, many during one
}

}  // namespace
}  // namespace zl
