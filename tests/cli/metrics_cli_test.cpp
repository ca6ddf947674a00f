// metrics_cli_test.cpp — what `zerolab` reports about itself and its runs: --version, the
// --metrics lines' wall time, throughput, learning rate and loss scale (the fp16 scale following
// the engines' scaler, across a resume too), and an fp16 summary that names loss scaling, not
// --skip-nonfinite, for the steps it skipped.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/cli_fixture.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;
using test::CliTest;
using test::kSmall;

std::vector<nlohmann::json> metrics_of(const fs::path& path) {
  std::vector<nlohmann::json> lines;
  std::istringstream text(slurp(path));
  for (std::string line; std::getline(text, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

TEST_F(CliTest, VersionPrintsTheVersionAndCommit) {
  const auto run = zerolab("--version");
  EXPECT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(std::regex_match(
      run.out, std::regex(R"(zerolab \d+\.\d+\.\d+ \(git ([0-9a-f]{12}|unknown)\)\n)")))
      << run.out;
}

TEST_F(CliTest, MetricsCarryWallTimeThroughputAndLearningRate) {
  const fs::path mlp = dir_ / "mlp.jsonl";
  ASSERT_EQ(zerolab("train " + kSmall + " --world 2 --metrics " + mlp.string()).exit_code, 0);
  const auto lines = metrics_of(mlp);
  ASSERT_EQ(lines.size(), 4u);
  double previous_wall_ms = 0.0;
  for (const auto& line : lines) {
    EXPECT_DOUBLE_EQ(line["lr"].get<double>(), 0.02);  // kSmall's --lr
    EXPECT_TRUE(line["loss_scale"].is_null());         // fp32 has no loss scale
    EXPECT_GE(line["wall_ms"].get<double>(), line["step_ms"].get<double>() - 0.001);
    EXPECT_GT(line["wall_ms"].get<double>(), previous_wall_ms);
    previous_wall_ms = line["wall_ms"].get<double>();
    // 2 ranks x 3 rows per step, over the step's wall time (printed to 0.001 ms).
    const double expected = 6.0 / (line["step_ms"].get<double>() / 1000.0);
    EXPECT_NEAR(line["samples_per_s"].get<double>(), expected, 0.01 * expected);
    EXPECT_FALSE(line.contains("tokens_per_s"));
  }
  const fs::path gpt = dir_ / "gpt.jsonl";
  ASSERT_EQ(zerolab("train --model gpt --preset tiny --steps 2 --micro-batch 2 --quiet --metrics " +
                    gpt.string())
                .exit_code,
            0);
  for (const auto& line : metrics_of(gpt)) {
    EXPECT_DOUBLE_EQ(line["lr"].get<double>(), 3e-3);                           // the GPT's default
    const double expected = 2 * 16 / (line["step_ms"].get<double>() / 1000.0);  // rows x tokens
    EXPECT_NEAR(line["tokens_per_s"].get<double>(), expected, 0.01 * expected);
  }
}

// --summary's host_waits_per_step is the most of the metrics' host_waits: a GPU's two (the loss
// and the norm) with accumulation on cpu-detached, none on the CPU. Neither blocks the host: the
// time in those waits and in the step's last one is 0.
TEST_F(CliTest, SummaryCountsTheHostWaitsOfAStep) {
  for (const char* accelerator : {"cpu", "cpu-detached"}) {
    const fs::path summary = dir_ / fmt::format("summary-{}.json", accelerator);
    const fs::path metrics = dir_ / fmt::format("metrics-{}.jsonl", accelerator);
    ASSERT_EQ(zerolab(fmt::format("train --model gpt --preset tiny --steps 2 --micro-batch 2 "
                                  "--grad-accum 3 --stage 3 --quiet --accelerator {} --summary {} "
                                  "--metrics {}",
                                  accelerator, summary.string(), metrics.string()))
                  .exit_code,
              0);
    std::ifstream file(summary);
    const auto doc = nlohmann::json::parse(file);
    const int expected = std::string(accelerator) == "cpu" ? 0 : 2;
    EXPECT_EQ(doc["host_waits_per_step"], expected) << accelerator;
    for (const auto& line : metrics_of(metrics)) {
      EXPECT_EQ(line["host_waits"], expected);
      EXPECT_EQ(line["host_wait_ms"], 0.0);
      EXPECT_EQ(line["drain_ms"], 0.0);
    }
  }
}

// --summary's nvme object counts what each rank's swap file moved: every step reads each unit's
// master, m and v of the own shard once and writes them once, and the init writes them first
// (12 bytes an element of the shard); with the optimizer in host memory it is all zeros.
TEST_F(CliTest, SummaryCountsTheSwapFilesBytes) {
  const fs::path swap = dir_ / "swap";
  fs::create_directories(swap);
  for (const bool nvme : {false, true}) {
    const fs::path summary = dir_ / (nvme ? "nvme.json" : "host.json");
    ASSERT_EQ(zerolab(fmt::format("train --stage 1 --world 2 --steps 3 --offload-optimizer {} "
                                  "--quiet --summary {}",
                                  nvme ? "--nvme-path " + swap.string() : "", summary.string()))
                  .exit_code,
              0);
    std::ifstream file(summary);
    const auto doc = nlohmann::json::parse(file);
    const std::int64_t shard_state_bytes = 12 * doc["padded_params"].get<std::int64_t>() / 2;
    for (const auto& rank : doc["ranks"]) {
      const auto& io = rank["nvme"];
      EXPECT_EQ(io["bytes_read"], nvme ? 3 * shard_state_bytes : 0);
      EXPECT_EQ(io["bytes_written"], nvme ? 4 * shard_state_bytes : 0);
      if (!nvme) continue;
      EXPECT_NEAR(io["read_gbps"].get<double>(),
                  io["bytes_read"].get<double>() / (io["read_ms"].get<double>() * 1e6), 1e-9);
      EXPECT_GT(io["write_gbps"].get<double>(), 0.0);
    }
  }
  EXPECT_TRUE(fs::is_empty(swap)) << "a swap file stays";
}

// 2^40 overflows fp16 at once: with --hysteresis 1 every step is skipped and halves the scale, so
// step s ran at 2^(41 - s). A run resumed at step 2 continues from the checkpoint's scale.
TEST_F(CliTest, Fp16MetricsFollowTheLossScaleAcrossAResume) {
  const std::string args =
      "train --model gpt --preset tiny --micro-batch 2 --fp16 --loss-scale-power 40 --hysteresis 1 "
      "--stage 1 --world 2 --quiet";
  const fs::path ck = dir_ / "ck";
  const auto whole =
      zerolab(fmt::format("{} --steps 4 --metrics {}", args, (dir_ / "whole.jsonl").string()));
  ASSERT_EQ(whole.exit_code, 0) << whole.err;
  EXPECT_NE(whole.out.find("skipped 4 of 4 steps: fp16 gradients overflowed, dynamic loss "
                           "scaling lowered the scale\n"),
            std::string::npos)
      << whole.out;
  EXPECT_EQ(whole.out.find("--skip-nonfinite"), std::string::npos) << whole.out;
  const auto lines = metrics_of(dir_ / "whole.jsonl");
  ASSERT_EQ(lines.size(), 4u);
  for (std::size_t s = 0; s < lines.size(); ++s) {
    EXPECT_TRUE(lines[s]["skipped"].get<bool>());
    EXPECT_EQ(lines[s]["loss_scale"].get<double>(), std::ldexp(1.0, 40 - static_cast<int>(s)));
  }
  ASSERT_EQ(zerolab(args + " --steps 2 --checkpoint-dir " + ck.string()).exit_code, 0);
  const auto resumed = zerolab(fmt::format("{} --steps 4 --resume {} --metrics {}", args,
                                           ck.string(), (dir_ / "resumed.jsonl").string()));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  const auto resumed_lines = metrics_of(dir_ / "resumed.jsonl");
  ASSERT_EQ(resumed_lines.size(), 2u);
  EXPECT_EQ(resumed_lines[0]["step"], 3);
  EXPECT_EQ(resumed_lines[0]["loss_scale"], lines[2]["loss_scale"]);
  EXPECT_EQ(resumed_lines[1]["loss_scale"], lines[3]["loss_scale"]);
}

}  // namespace
}  // namespace zl
