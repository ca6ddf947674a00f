// exit_code_cli_test.cpp — the zerolab command's exit code says what kind of failure ended it:
// 2 for a request that cannot work (a bad flag, contradicting settings, a config file, sizes), 3
// for a file the run reads that is wrong (--data, --init, the checkpoint it resumes or
// consolidates), 1 for a fault while running (an injected fault, a non-finite loss), each with
// one line on stderr.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>

#include "support/cli_fixture.hpp"

namespace zl {
namespace {

using test::CliTest;
using test::kSmall;
using test::kSmallShape;

constexpr int kRuntime = 1, kUsage = 2, kInput = 3;

TEST_F(CliTest, TheExitCodeSaysWhatKindOfFailureEndedTheRun) {
  const std::string dir = dir_.string();
  std::ofstream(dir_ / "tokens.bin") << "odd";  // 3 bytes: not whole uint16 tokens
  std::ofstream(dir_ / "init.safetensors") << "not a safetensors file";
  std::filesystem::create_directories(dir_ / "empty_ckpt");
  ASSERT_EQ(
      zerolab("train " + kSmallShape + " --stage 1 --steps 2 --checkpoint-dir " + dir + "/saved")
          .exit_code,
      0);
  std::string wider = kSmall;
  wider.replace(wider.find("--width 12"), 10, "--width 13");
  const std::tuple<std::string, int, std::string> cases[] = {
      {"train --stage 9", kUsage, "--stage"},
      {"train " + kSmall + " --world 2 --engine reference --inject-fault rank=0,at=all_gather:1,kind=throw",
       kUsage, "needs a distributed engine"},
      {"train " + kSmall + " --world 2 --metrics " + dir + "/x --summary " + dir + "/x", kUsage,
       "are the same file"},
      {"train --model gpt --preset tiny --steps 1 --data " + dir + "/tokens.bin", kInput,
       "tokens.bin"},
      {"train " + kSmall + " --init " + dir + "/init.safetensors", kInput, "init.safetensors"},
      {"train " + kSmall + " --stage 1 --resume " + dir + "/empty_ckpt", kInput, "empty_ckpt"},
      {"train " + wider + " --stage 1 --resume " + dir + "/saved", kUsage,
       "it holds another model"},
      {"train " + kSmall + " --stage 1 --checkpoint-every 0 --checkpoint-dir " + dir + "/ck",
       kUsage, "--checkpoint-every 0 is invalid: use 1 or more steps"},
      {"train " + kSmall + " --stage 1 --checkpoint-every -1 --checkpoint-dir " + dir + "/ck",
       kUsage, "--checkpoint-every -1 is invalid: use 1 or more steps"},
      {"consolidate " + dir + "/absent " + dir + "/out.safetensors", kInput, "absent"},
      {"train " + kSmall + " --stage 2 --world 2 --inject-fault rank=1,at=reduce_scatter:2,kind=throw",
       kRuntime, "injected fault"},
      {"train --layers 3 --width 12 --in 5 --classes 4 --micro-batch 3 --quiet --steps 4 --lr 1e30",
       kRuntime, "gradient norm is nan"},
  };
  for (const auto& [args, code, part] : cases) {
    const auto run = zerolab(args);
    EXPECT_EQ(run.exit_code, code) << args << "\n" << run.err;
    EXPECT_NE(run.err.find(part), std::string::npos) << args << "\n" << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << args << "\n" << run.err;
  }
}

}  // namespace
}  // namespace zl
