// output_paths_cli_test.cpp — every path `zerolab train` writes is checked before anything runs:
// an output on or inside a checkpoint folder, on a device, fifo or directory, or two outputs on
// one file are refused in one line with exit code 2, and nothing on disk changes (the checkpoint
// still resumes, the device node is still one, no lock file is left).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <tuple>
#include <utility>

#include "support/cli_fixture.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;
using test::CliTest;
using test::kSmall;
using test::kSmallShape;

constexpr int kUsageExit = 2;

// Every file and folder under `dir` with its bytes ("<dir>" for a folder).
std::map<std::string, std::string> contents(const fs::path& dir) {
  std::map<std::string, std::string> found;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    found[entry.path().string()] = entry.is_directory() ? "<dir>" : slurp(entry.path());
  }
  return found;
}

// `run` was refused before anything ran: exit code 2 and one `zerolab: error:` line naming `path`.
void expect_refused(const CommandResult& run, const std::string& path, const std::string& args) {
  EXPECT_EQ(run.exit_code, kUsageExit) << args << "\n" << run.err;
  EXPECT_TRUE(run.err.starts_with("zerolab: error: ")) << args << "\n" << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << args << "\n" << run.err;
  EXPECT_NE(run.err.find(path), std::string::npos) << args << " does not name " << path << "\n"
                                                   << run.err;
  EXPECT_EQ(run.out, "") << args;  // no training: not even the summary
}

// An output on or inside a checkpoint folder would replace one of its files (`latest`, a
// manifest, a rank file), and the next --resume would fail: whether the run resumes the folder,
// saves to it, resumes one of its steps or does neither, the output is refused, the folder keeps
// its bytes and still resumes. A folder the run would create is not created.
TEST_F(CliTest, AnOutputInACheckpointFolderIsRefusedAndTheCheckpointStillResumes) {
  const fs::path ck = dir_ / "ck";
  const std::string train = "train --stage 1 --world 2 " + kSmallShape;
  ASSERT_EQ(
      zerolab(train + " --steps 4 --checkpoint-every 2 --checkpoint-dir " + ck.string()).exit_code,
      0);
  const auto before = contents(ck);
  const fs::path step2 = ck / "step-00000002";
  const fs::path step4 = ck / "step-00000004";
  const fs::path fresh = dir_ / "fresh_ck";
  const std::pair<std::string, fs::path> cases[] = {
      {"--checkpoint-dir " + ck.string() + " --save-final", ck / "latest"},
      {"--resume " + ck.string() + " --metrics", step2 / "manifest.json"},
      {"--resume " + ck.string() + " --checkpoint-dir " + ck.string() + " --save-final",
       step4 / "rank-0.safetensors"},
      {"--resume " + step4.string() + " --summary", ck / "latest"},
      {"--save-final", ck / "latest"},  // a run that names no checkpoint folder
      {"--save-data", ck / "." / "step-00000004" / ".." / "latest"},
      {"--resume " + ck.string() + " --trace", ck},
      {"--checkpoint-dir " + fresh.string() + " --metrics", fresh / "m.jsonl"},
  };
  for (const auto& [flags, output] : cases) {
    const std::string args = fmt::format("{} --steps 6 {} {}", train, flags, output.string());
    expect_refused(zerolab(args), output.string(), args);
    EXPECT_EQ(contents(ck), before) << args;
    EXPECT_FALSE(fs::exists(fresh)) << args;
  }
  const auto resumed = zerolab(train + " --steps 6 --resume " + ck.string());
  EXPECT_EQ(resumed.exit_code, 0) << resumed.err;
}

// --save-final naming the folder --checkpoint-dir saves to used to fail only after training (and
// after saving into it): now before anything runs, and the folder is not created.
TEST_F(CliTest, ASaveFinalOnTheCheckpointFolderIsRefusedBeforeTraining) {
  const fs::path z = dir_ / "Z";
  const std::string args = fmt::format(
      "train --stage 1 --world 2 {} --save-final {} "
      "--checkpoint-dir {}",
      kSmall, z.string(), z.string());
  expect_refused(zerolab(args), z.string(), args);
  EXPECT_TRUE(files().empty()) << args << " left " << files().front();
}

// The rename that commits an output would replace a device node, a fifo or a link to one with a
// regular file: each is refused, naming it, and left as it was. Outputs are written as a new
// file, never into what is there, so a directory is refused too.
TEST_F(CliTest, AnOutputThatIsNotARegularFileIsRefusedAndLeftAsItWas) {
  const fs::path fifo = dir_ / "fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0) << std::strerror(errno);
  fs::create_symlink(fifo, dir_ / "to_fifo");
  fs::create_directories(dir_ / "folder");
  const auto is_fifo = [](const fs::path& path) { return fs::is_fifo(fs::symlink_status(path)); };
  const std::pair<const char*, fs::path> cases[] = {
      {"--metrics", fifo}, {"--save-final", dir_ / "to_fifo"}, {"--trace", dir_ / "folder"}};
  for (const auto& [flag, path] : cases) {
    const std::string args = fmt::format("train {} {} {}", kSmall, flag, path.string());
    expect_refused(zerolab(args), path.string(), args);
    EXPECT_TRUE(is_fifo(fifo)) << args;
    EXPECT_TRUE(fs::is_symlink(dir_ / "to_fifo")) << args;
    EXPECT_TRUE(fs::is_directory(dir_ / "folder")) << args;
  }
  // A copy of /dev/null (character device 1, 3) where mknod is allowed (root).
  const fs::path null = dir_ / "null";
  if (::mknod(null.c_str(), S_IFCHR | 0666, makedev(1, 3)) != 0) {
    GTEST_SKIP() << "mknod " << null << ": " << std::strerror(errno) << " (the fifo cases ran)";
  }
  fs::create_symlink(null, dir_ / "to_null");
  const std::pair<const char*, fs::path> device_cases[] = {
      {"--metrics", null}, {"--save-final", null}, {"--summary", dir_ / "to_null"}};
  for (const auto& [flag, path] : device_cases) {
    const std::string args = fmt::format("train {} {} {}", kSmall, flag, path.string());
    expect_refused(zerolab(args), path.string(), args);
    struct stat node {};
    ASSERT_EQ(::lstat(null.c_str(), &node), 0) << args;
    EXPECT_TRUE(S_ISCHR(node.st_mode)) << args << ": " << null << " is no longer a device";
    EXPECT_EQ(node.st_rdev, makedev(1, 3)) << args;
  }
  EXPECT_EQ(files().size(), 5u);  // fifo, to_fifo, folder, null, to_null: no lock file left
}

// Two outputs on one file, however they are spelled: `./Y` and `Y` (once refused as "in use by
// another run", their two locks being one file), a link and its target, a hard link and its
// original. Each is refused as the same file, naming it, and neither file changes.
TEST_F(CliTest, TwoOutputsOnOneFileAreRefusedHoweverTheyAreNamed) {
  const std::string cd = "cd " + dir_.string() + " && ";
  const std::string relative = fmt::format("train {} --save-final ./Y --summary Y", kSmall);
  const auto same = zerolab(relative, cd);
  expect_refused(same, "--summary and --save-final are the same file Y (also named ./Y)", relative);
  EXPECT_TRUE(files().empty()) << relative << " left " << files().front();

  std::ofstream(dir_ / "a") << "kept a";
  fs::create_hard_link(dir_ / "a", dir_ / "hard_a");
  fs::create_symlink(dir_ / "a", dir_ / "soft_a");
  fs::create_directories(dir_ / "sub");
  fs::create_directory_symlink(dir_ / "sub", dir_ / "alias");
  const std::tuple<const char*, std::string, const char*, std::string> cases[] = {
      {"--metrics", (dir_ / "a").string(), "--summary", (dir_ / "hard_a").string()},
      {"--save-init", (dir_ / "soft_a").string(), "--trace", (dir_ / "a").string()},
      {"--metrics", (dir_ / "sub" / "m").string(), "--save-data", (dir_ / "alias" / "m").string()},
  };
  for (const auto& [first, first_path, second, second_path] : cases) {
    const std::string args =
        fmt::format("train {} {} {} {} {}", kSmall, first, first_path, second, second_path);
    const auto run = zerolab(args);
    expect_refused(run, first_path, args);
    EXPECT_NE(run.err.find("are the same file"), std::string::npos) << args << "\n" << run.err;
    EXPECT_EQ(slurp(dir_ / "a"), "kept a") << args;
    EXPECT_EQ(slurp(dir_ / "hard_a"), "kept a") << args;
    EXPECT_TRUE(fs::is_symlink(dir_ / "soft_a")) << args;
    EXPECT_EQ(files().size(), 5u) << args;  // a, hard_a, soft_a, sub, alias: no lock file left
    EXPECT_TRUE(fs::is_empty(dir_ / "sub")) << args;
  }
}

}  // namespace
}  // namespace zl
