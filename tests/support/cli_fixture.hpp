// cli_fixture.hpp — what the tests that run the zerolab binary share (tests/cli, tests/sim): a
// fresh directory per test, the binary behind an optional prefix command, and the small MLP run.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "support/command.hpp"
#include "support/test_paths.hpp"

namespace zl::test {

namespace fs = std::filesystem;

/// A test directory of its own, removed after the test, and the zerolab binary to run.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("zerolab_cli_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  /// Runs the binary with `args`, optionally behind a `prefix` command such as "timeout 1 ". A
  /// run that fails by itself (no prefix) is held to the rule of exit codes (expect_exit_rule).
  static CommandResult zerolab(const std::string& args, const std::string& prefix = "") {
    CommandResult run = run_command(prefix + std::string(zl::test::zerolab_binary()) + " " + args);
    if (prefix.empty() && run.exit_code != 0) expect_exit_rule(run, args);
    return run;
  }

  /// The rule every refusal and failure keeps (docs/usage.md, "Exit codes"): exit code 1 (a
  /// fault while running), 2 (the request cannot work) or 3 (a file the run reads is wrong);
  /// every line on stderr is zerolab's own ("zerolab: error: ...", or a warning, note or resume
  /// line before it), the last an error; and a refused request or input ran nothing, so stdout
  /// is empty.
  static void expect_exit_rule(const CommandResult& run, const std::string& args) {
    EXPECT_TRUE(run.exit_code == 1 || run.exit_code == 2 || run.exit_code == 3)
        << "exit code " << run.exit_code << ": " << args << "\n" << run.err;
    std::size_t start = 0;
    std::string last;
    while (start < run.err.size()) {
      const std::size_t end = std::min(run.err.find('\n', start), run.err.size());
      last = run.err.substr(start, end - start);
      EXPECT_TRUE(last.starts_with("zerolab: ")) << "stray stderr line: " << args << "\n"
                                                 << run.err;
      start = end + 1;
    }
    EXPECT_TRUE(last.starts_with("zerolab: error: ")) << "no error line last: " << args << "\n"
                                                      << run.err;
    if (run.exit_code == 2 || run.exit_code == 3) {
      EXPECT_EQ(run.out, "") << "exit code " << run.exit_code << " after output: " << args;
    }
  }

  // Files in the test directory, for "nothing was left behind".
  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(dir_))
      names.push_back(entry.path().filename().string());
    return names;
  }

  fs::path dir_;
};

/// The small run's shape and settings, and with its 4 steps.
inline const std::string kSmallShape =
    "--layers 3 --width 12 --in 5 --classes 4 --micro-batch 3 --lr 0.02 --quiet";
inline const std::string kSmall = kSmallShape + " --steps 4";

}  // namespace zl::test
