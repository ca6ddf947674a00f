// cli_fixture.hpp — what the tests that run the zerolab binary share (tests/cli, tests/sim): a
// fresh directory per test, the binary behind an optional prefix command, and the small MLP run.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

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

  /// Runs the binary with `args`, optionally behind a `prefix` command such as "timeout 1 ".
  static CommandResult zerolab(const std::string& args, const std::string& prefix = "") {
    return run_command(prefix + std::string(zl::test::zerolab_binary()) + " " + args);
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
