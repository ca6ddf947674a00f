// output_paths_cli_test.cpp — every path `zerolab train` writes is checked before anything runs:
// an output on a device, fifo or directory is refused in one line with exit code 2, and nothing on
// disk changes (the device node is still one, no lock file is left).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>

#include "support/cli_fixture.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;
using test::CliTest;
using test::kSmall;

constexpr int kUsageExit = 2;

// `run` was refused before anything ran: exit code 2 and one `zerolab: error:` line naming `path`.
void expect_refused(const CommandResult& run, const std::string& path, const std::string& args) {
  EXPECT_EQ(run.exit_code, kUsageExit) << args << "\n" << run.err;
  EXPECT_TRUE(run.err.starts_with("zerolab: error: ")) << args << "\n" << run.err;
  EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << args << "\n" << run.err;
  EXPECT_NE(run.err.find(path), std::string::npos) << args << " does not name " << path << "\n"
                                                   << run.err;
  EXPECT_EQ(run.out, "") << args;  // no training: not even the summary
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

}  // namespace
}  // namespace zl
