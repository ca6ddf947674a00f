// output_lock_cli_test.cpp — a run owns the files it writes from its start, as it owns its
// checkpoint folder and its swap folders: with one zerolab process running, a second that names
// one of its outputs or its --nvme-path fails at its start in one line (exit code 1) and writes
// nothing; the lock file a killed run leaves behind blocks no later run, the next run removes the
// temporaries and swap files a killed run left, and a run that ends removes its lock files and
// its swap folders.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "core/file_lock.hpp"
#include "support/cli_fixture.hpp"
#include "support/test_paths.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;
using test::CliTest;

// A zerolab process running in the background, its stdout and stderr in files; killed (SIGKILL:
// nothing is cleaned up on the way out) when the test is done with it.
class BackgroundRun {
 public:
  BackgroundRun(const std::string& args, const fs::path& out) : out_(out) {
    const std::string line = fmt::format("exec {} {} >{} 2>{}.err", zl::test::zerolab_binary(),
                                         args, out.string(), out.string());
    pid_ = ::fork();
    if (pid_ == 0) {
      ::execl("/bin/sh", "sh", "-c", line.c_str(), static_cast<char*>(nullptr));
      ::_exit(127);
    }
  }
  ~BackgroundRun() { kill(); }
  BackgroundRun(const BackgroundRun&) = delete;
  BackgroundRun& operator=(const BackgroundRun&) = delete;

  // True once the run has printed its first step (it holds its locks from before that step), false
  // if it ended or printed none within a minute.
  bool wait_for_first_step() const {
    for (int i = 0; i < 600; ++i) {
      if (slurp(out_).find("step ") != std::string::npos) return true;
      if (::waitpid(pid_, nullptr, WNOHANG) != 0) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
  }

 private:
  fs::path out_;
  pid_t pid_ = -1;
};

// Sorted names and sizes of every file under `dir`.
std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    names.push_back(entry.path().string() + " " +
                    std::to_string(entry.is_regular_file() ? fs::file_size(entry) : 0));
  }
  std::ranges::sort(names);
  return names;
}

// Long enough to be running while the test's other runs start; killed by the test.
const std::string kLongRun =
    "train --stage 1 --world 2 --layers 3 --width 12 --in 5 --classes 4 --micro-batch 3 "
    "--steps 1000000 --steps-per-print 1";

TEST_F(CliTest, OutputLockRefusesASecondRunAtItsStart) {
  const fs::path out = dir_ / "out";
  fs::create_directories(out);
  const auto path = [&](const char* name) { return (out / name).string(); };
  BackgroundRun first(kLongRun + " --metrics " + path("m.jsonl") + " --summary " + path("s.json") +
                          " --save-final " + path("f.st") + " --trace " + path("t.json"),
                      dir_ / "first.out");
  ASSERT_TRUE(first.wait_for_first_step()) << slurp(dir_ / "first.out.err");
  const auto before = listing(out);
  // Each output of the running run, named by a second run beside an output of its own (locked
  // before the held one for --trace, so its lock file is removed again on the way out).
  const std::pair<std::string, std::string> cases[] = {{"--metrics", "m.jsonl"},
                                                       {"--summary", "s.json"},
                                                       {"--save-final", "f.st"},
                                                       {"--trace", "t.json"}};
  for (const auto& [flag, name] : cases) {
    const char* own = flag == "--save-final" ? "--save-init" : "--save-final";
    const auto second =
        zerolab(fmt::format("train {} --stage 2 --world 2 {} {} {} {}", test::kSmall, flag,
                            path(name.c_str()), own, path("second.st")));
    EXPECT_EQ(second.exit_code, 1) << flag << "\n" << second.err;
    EXPECT_NE(second.err.find(fmt::format("{} {} is in use by another run: wait for it to end "
                                          "or write to another path",
                                          flag, path(name.c_str()))),
              std::string::npos)
        << second.err;
    EXPECT_EQ(std::count(second.err.begin(), second.err.end(), '\n'), 1) << second.err;
    EXPECT_EQ(listing(out), before) << flag;  // nothing written, no lock file of its own left
  }
}

TEST_F(CliTest, OutputLockLeftByAKilledRunDoesNotBlockAndAnEndedRunLeavesNone) {
  const fs::path metrics = dir_ / "m.jsonl";
  {
    BackgroundRun killed(kLongRun + " --metrics " + metrics.string(), dir_ / "killed.out");
    ASSERT_TRUE(killed.wait_for_first_step()) << slurp(dir_ / "killed.out.err");
  }
  // The kernel dropped the killed run's lock; only the file is left. So is a temporary of a
  // write the kill cut short (made here, as a kill mid-write would leave it).
  EXPECT_TRUE(fs::exists(dir_ / "m.jsonl.lock"));
  EXPECT_FALSE(fs::exists(metrics));
  for (const char* name : {"m.jsonl.tmp.4242", "m.jsonl.tmp.x", "other.tmp.4242"}) {
    std::ofstream(dir_ / name) << "partial";
  }
  const auto next = zerolab("train " + test::kSmall + " --stage 1 --world 2 --metrics " +
                            metrics.string() + " --save-final " + (dir_ / "f.st").string());
  ASSERT_EQ(next.exit_code, 0) << next.err;
  EXPECT_TRUE(fs::exists(metrics));
  for (const auto& name : files()) {
    EXPECT_FALSE(name.ends_with(".lock")) << name << " was left behind";
  }
  // The next run that owns m.jsonl removed its stale temporary, and nothing that is not one.
  EXPECT_FALSE(fs::exists(dir_ / "m.jsonl.tmp.4242"));
  EXPECT_TRUE(fs::exists(dir_ / "m.jsonl.tmp.x"));
  EXPECT_TRUE(fs::exists(dir_ / "other.tmp.4242"));
}

// The swap folder of ZeRO-Infinity's NVMe tier, nvme_path/zerolab-swap/rank<k>, is the running
// run's: a second run naming the same nvme_path is refused before it makes a file there; once
// the first is killed, the next run takes the folder over, removes the swap files the killed
// run left (and those of ranks past its world that no live run holds), and leaves nothing there
// when it ends.
TEST_F(CliTest, SwapFolderIsOneRunsAndAnEndedRunLeavesNone) {
  const fs::path nvme = dir_ / "nvme";
  fs::create_directories(nvme);
  const std::string offload = " --offload-optimizer --nvme-path " + nvme.string();
  {
    BackgroundRun first(kLongRun + offload, dir_ / "first.out");
    ASSERT_TRUE(first.wait_for_first_step()) << slurp(dir_ / "first.out.err");
    const auto before = listing(nvme);
    EXPECT_EQ(std::ranges::count_if(before,
                                    [](const std::string& name) {
                                      return name.find("/zerolab-swap/rank1/zerolab-") !=
                                             std::string::npos;
                                    }),
              1)
        << fmt::format("{}", fmt::join(before, "\n"));
    const auto second = zerolab("train " + test::kSmall + " --stage 2 --world 2" + offload);
    EXPECT_EQ(second.exit_code, 1) << second.err;
    // Each rank finds its folder held; whichever says so first ends the run.
    EXPECT_NE(second.err.find("--nvme-path " + nvme.string() + "/zerolab-swap/rank"),
              std::string::npos)
        << second.err;
    EXPECT_NE(second.err.find(" is in use by another run: wait for it to end or pass another "
                              "--nvme-path"),
              std::string::npos)
        << second.err;
    EXPECT_EQ(std::count(second.err.begin(), second.err.end(), '\n'), 1) << second.err;
    EXPECT_EQ(listing(nvme), before);
  }
  // Killed: its swap files and lock files stay, its locks do not. A killed run of four ranks
  // left rank 3's folder too; a live one of four holds rank 2's.
  EXPECT_TRUE(fs::exists(nvme / "zerolab-swap" / "rank0" / ".lock"));
  std::ofstream(nvme / "zerolab-swap" / "rank0" / "notes.txt") << "the user's";
  for (const char* rank : {"rank2", "rank3"}) {
    fs::create_directories(nvme / "zerolab-swap" / rank);
    std::ofstream(nvme / "zerolab-swap" / rank / "zerolab-1-0.swap") << "state";
  }
  const FileLock live(nvme / "zerolab-swap" / "rank2" / ".lock", "rank2", "", LockFileFate::Keep);
  const auto next = zerolab("train " + test::kSmall + " --stage 2 --world 2" + offload);
  ASSERT_EQ(next.exit_code, 0) << next.err;
  for (const char* rank : {"rank1", "rank3"}) {
    EXPECT_NE(next.err.find("removed 1 swap file a run that ended without cleaning up left in " +
                            (nvme / "zerolab-swap" / rank).string()),
              std::string::npos)
        << next.err;
  }
  // Only the user's file, which kept rank0's folder, and the live run's rank 2 are left.
  EXPECT_EQ(listing(nvme),
            (std::vector<std::string>{
                (nvme / "zerolab-swap").string() + " 0",
                (nvme / "zerolab-swap" / "rank0").string() + " 0",
                (nvme / "zerolab-swap" / "rank0" / "notes.txt").string() + " 10",
                (nvme / "zerolab-swap" / "rank2").string() + " 0",
                (nvme / "zerolab-swap" / "rank2" / ".lock").string() + " 0",
                (nvme / "zerolab-swap" / "rank2" / "zerolab-1-0.swap").string() + " 5"}));
  fs::remove(nvme / "zerolab-swap" / "rank0" / "notes.txt");
  fs::remove_all(nvme / "zerolab-swap" / "rank2");
  const auto last = zerolab("train " + test::kSmall + " --stage 3 --world 2 --offload-param" +
                            offload + " --param-nvme-path " + nvme.string());
  ASSERT_EQ(last.exit_code, 0) << last.err;
  EXPECT_EQ(last.err.find("removed"), std::string::npos) << last.err;
  EXPECT_TRUE(fs::is_empty(nvme)) << fmt::format("{}", fmt::join(listing(nvme), "\n"));
}

}  // namespace
}  // namespace zl
