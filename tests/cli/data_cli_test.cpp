// data_cli_test.cpp — `zerolab train --data` through the binary: a GPT learns from an llm.c shard,
// a resumed run over a glob of shards continues the sample stream (it ends bitwise where the
// uninterrupted run ends), and truncated, wrong-magic and wrong-version shards fail in one line
// naming the file.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "support/cli_fixture.hpp"
#include "support/token_files.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;
using test::CliTest;

// A stream the tiny GPT (vocab 64) learns quickly: 0 1 2 ... 31, again and again.
std::vector<std::uint16_t> cycle_tokens(std::size_t count) {
  std::vector<std::uint16_t> tokens(count);
  for (std::size_t i = 0; i < count; ++i) tokens[i] = static_cast<std::uint16_t>(i % 32);
  return tokens;
}

const std::string kTinyGpt = "train --model gpt --preset tiny --micro-batch 4 --quiet";

TEST_F(CliTest, GptLearnsFromAnLlmcShard) {
  const fs::path shard = dir_ / "train_000000.bin";
  test::write_llmc_shard(shard, cycle_tokens(4000));
  const auto run = zerolab(fmt::format("{} --steps 60 --data {}", kTinyGpt, shard.string()));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::smatch match;
  const std::regex pattern(R"(loss ([0-9.]+) -> ([0-9.]+))");
  ASSERT_TRUE(std::regex_search(run.out, match, pattern)) << run.out;
  EXPECT_GT(std::stod(match[1]), 4.0);  // ln(64) = 4.16: the untrained model guesses uniformly
  EXPECT_LT(std::stod(match[2]), 1.0);  // each next token follows from the last
}

// Sample g is a function of (seed, g) and the checkpoint records the next g, so a run resumed
// from step 2 draws what the uninterrupted run draws from step 2 on.
TEST_F(CliTest, AResumedRunContinuesTheShardStream) {
  test::write_llmc_shard(dir_ / "shard_000.bin", cycle_tokens(300));
  std::vector<std::uint16_t> other = cycle_tokens(500);
  std::ranges::reverse(other);
  test::write_llmc_shard(dir_ / "shard_001.bin", other);
  const fs::path ck = dir_ / "ck";
  const std::string args =
      fmt::format("{} --stage 2 --world 2 --data '{}'", kTinyGpt, (dir_ / "shard_*.bin").string());
  ASSERT_EQ(
      zerolab(args + " --steps 2 --checkpoint-every 2 --checkpoint-dir " + ck.string()).exit_code,
      0);
  const auto resumed = zerolab(fmt::format("{} --steps 4 --resume {} --save-final {}", args,
                                           ck.string(), (dir_ / "resumed.st").string()));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto whole =
      zerolab(fmt::format("{} --steps 4 --save-final {}", args, (dir_ / "whole.st").string()));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_FALSE(slurp(dir_ / "whole.st").empty());
  EXPECT_EQ(slurp(dir_ / "resumed.st"), slurp(dir_ / "whole.st"));
}

TEST_F(CliTest, BadShardsFailInOneLineNamingTheFile) {
  const fs::path shard = dir_ / "shard.bin";
  const auto body = test::token_bytes(cycle_tokens(100));
  struct Case {
    std::vector<unsigned char> header;
    std::size_t body_bytes;
    std::string expected;
  };
  const Case cases[] = {
      {test::llmc_header(100), body.size() - 10, "the llm.c header declares 100 tokens"},
      {test::llmc_header(100, 20240519), body.size(), "its magic is 20240519"},
      {test::llmc_header(100, kLlmcMagic, 2), body.size(), "llm.c shard version 2"},
  };
  for (const Case& bad : cases) {
    std::vector<unsigned char> bytes = bad.header;
    bytes.insert(bytes.end(), body.begin(), body.begin() + static_cast<long>(bad.body_bytes));
    test::write_file(shard, bytes);
    const auto run = zerolab(fmt::format("{} --steps 1 --data {}", kTinyGpt, shard.string()));
    EXPECT_NE(run.exit_code, 0) << bad.expected;
    EXPECT_NE(run.err.find("--data " + shard.string() + ": "), std::string::npos) << run.err;
    EXPECT_NE(run.err.find(bad.expected), std::string::npos) << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
  }
}

}  // namespace
}  // namespace zl
