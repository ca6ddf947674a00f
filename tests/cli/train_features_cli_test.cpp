// train_features_cli_test.cpp — `zerolab train` end to end with the GPT and the training
// features: the tiny GPT learns with the defaults, --save-data writes the token windows it used,
// a DeepSpeed config with ZeRO-3, fp16, accumulation, clipping, buckets, prefetch and
// persistence writes the same final parameters as the reference given the same settings as flags,
// and one with the optimizer on the NVMe tier the same as with it in host memory.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <string>

#include "ckpt/safetensors.hpp"
#include "ckpt/test_files.hpp"
#include "support/command.hpp"
#include "support/test_paths.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;

class TrainFeaturesCli : public ::testing::Test {
 protected:
  static CommandResult zerolab(const std::string& args) {
    return run_command(fmt::format("{} {}", zl::test::zerolab_binary(), args));
  }
  test::TempDir temp_;
  const fs::path& dir_ = temp_.path();
};

// "loss A -> B" from the last line.
std::pair<double, double> first_and_last_loss(const std::string& out) {
  std::smatch match;
  const std::regex pattern(R"(loss ([0-9.]+) -> ([0-9.]+))");
  EXPECT_TRUE(std::regex_search(out, match, pattern)) << out;
  return {std::stod(match[1]), std::stod(match[2])};
}

TEST_F(TrainFeaturesCli, TinyGptLearnsWithTheDefaults) {
  const auto run = zerolab("train --model gpt --preset tiny --stage 3 --world 2 --quiet");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto [first, last] = first_and_last_loss(run.out);
  EXPECT_GT(first, 4.0);  // ln(64) = 4.16: the untrained model guesses uniformly
  EXPECT_LT(last, 0.5 * first);
}

// ZeRO-Infinity from a DeepSpeed config, streamed (pipeline_read and pipeline_write, three units
// in host memory, 8 KiB blocks four at a time): the optimizer on disk trains the bits of the
// optimizer in host memory, no key is said to have no effect, the summary books the swap file's
// bytes and times each update, and the folder is left as it was.
TEST_F(TrainFeaturesCli, NvmeOffloadTrainsTheSameBitsAndLeavesTheFolderEmpty) {
  const fs::path nvme = dir_ / "nvme";
  fs::create_directories(nvme);
  const std::string args =
      "train --stage 2 --world 2 --layers 3 --width 12 --in 5 --classes 4 --steps 3 --quiet ";
  const auto host =
      zerolab(args + "--offload-optimizer --save-final " + (dir_ / "host.st").string());
  ASSERT_EQ(host.exit_code, 0) << host.err;
  std::ofstream(dir_ / "ds.json") << fmt::format(
      R"({{"zero_optimization": {{"stage": 2, "offload_optimizer": {{"device": "nvme", )"
      R"("nvme_path": "{}", "pipeline_read": true, "pipeline_write": true, "buffer_count": 3}}}}, )"
      R"("aio": {{"block_size": 8192, "queue_depth": 2, "thread_count": 2, )"
      R"("single_submit": false, "overlap_events": true}}}})",
      nvme.string());
  const auto disk =
      zerolab(args + "--config " + (dir_ / "ds.json").string() + " --save-final " +
              (dir_ / "disk.st").string() + " --summary " + (dir_ / "summary.json").string());
  ASSERT_EQ(disk.exit_code, 0) << disk.err;
  EXPECT_EQ(disk.err.find("no effect"), std::string::npos) << disk.err;
  EXPECT_EQ(test::file_bytes(dir_ / "disk.st"), test::file_bytes(dir_ / "host.st"));
  const auto summary = nlohmann::json::parse(std::ifstream(dir_ / "summary.json"));
  for (const auto& rank : summary["ranks"]) {
    EXPECT_GT(rank["bytes"]["current"]["nvme_optimizer"].get<std::int64_t>(), 0) << rank.dump();
    EXPECT_EQ(rank["bytes"]["current"]["nvme_optimizer"].get<std::int64_t>(),
              2 * rank["bytes"]["current"]["nvme_master"].get<std::int64_t>());
    const auto& updates = rank["nvme"]["updates"];
    EXPECT_EQ(updates["count"], 3) << rank.dump();
    EXPECT_GT(updates["wall_ms"].get<double>(), 0.0);
    EXPECT_LE(updates["adamw_ms"].get<double>(), updates["wall_ms"].get<double>());
    EXPECT_LE(updates["read_ms"].get<double>(), updates["wall_ms"].get<double>());
    // Each update reads and writes every unit's master, m and v; the run's writes add the file's
    // first one, which is no update's.
    const std::int64_t state_bytes = rank["bytes"]["current"]["nvme_master"].get<std::int64_t>() +
                                     rank["bytes"]["current"]["nvme_optimizer"].get<std::int64_t>();
    EXPECT_EQ(updates["bytes_read"], 3 * state_bytes) << rank.dump();
    EXPECT_EQ(updates["bytes_written"], 3 * state_bytes) << rank.dump();
    EXPECT_EQ(rank["nvme"]["bytes_written"], 4 * state_bytes) << rank.dump();
    EXPECT_NEAR(updates["read_gbps"].get<double>(),
                3.0 * static_cast<double>(state_bytes) / 1e6 / updates["read_ms"].get<double>(),
                1e-9);
    EXPECT_NEAR(updates["write_gbps"].get<double>(),
                3.0 * static_cast<double>(state_bytes) / 1e6 / updates["write_ms"].get<double>(),
                1e-9);
  }
  EXPECT_TRUE(fs::is_empty(nvme));
}

// DeepSpeedExamples' ZeRO-Infinity config as published (stage 3, fp16, both offloads on nvme, an
// aio section), its nvme_path pointed at a folder here: it trains the bits of the same config with
// both offloads in host memory, books the parameters on disk too, and leaves the folder empty.
TEST_F(TrainFeaturesCli, DeepSpeedExamplesInfinityConfigRunsAsPublished) {
  const fs::path nvme = dir_ / "nvme";
  fs::create_directories(nvme);
  std::stringstream published;
  published << std::ifstream(fs::path(test::data_dir()) / "cli" / "ds_configs" /
                             "deepspeedexamples_megatron_zero_infinity.json")
                   .rdbuf();
  const auto with = [](std::string text, const std::string& from, const std::string& to) {
    for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at)) {
      text.replace(at, from.size(), to);
      at += to.size();
    }
    return text;
  };
  const std::string on_disk = with(published.str(), "/nvme_data", nvme.string());
  std::ofstream(dir_ / "infinity.json") << on_disk;
  std::ofstream(dir_ / "host.json") << with(on_disk, R"("device": "nvme")", R"("device": "cpu")");
  const std::string args =
      "train --world 2 --layers 3 --width 12 --in 5 --classes 4 --steps 3 --quiet --config ";
  const auto host = zerolab(args + (dir_ / "host.json").string() + " --save-final " +
                            (dir_ / "host.st").string());
  ASSERT_EQ(host.exit_code, 0) << host.err;
  const auto disk =
      zerolab(args + (dir_ / "infinity.json").string() + " --save-final " +
              (dir_ / "disk.st").string() + " --summary " + (dir_ / "summary.json").string());
  ASSERT_EQ(disk.exit_code, 0) << disk.err;
  EXPECT_EQ(test::file_bytes(dir_ / "disk.st"), test::file_bytes(dir_ / "host.st"));
  const auto summary = nlohmann::json::parse(std::ifstream(dir_ / "summary.json"));
  for (const auto& rank : summary["ranks"]) {
    const auto& current = rank["bytes"]["current"];
    EXPECT_GT(current["nvme_params"].get<std::int64_t>(), 0) << rank.dump();
    // max_in_cpu 1 keeps no shard in host memory; the shards (64, 128 and 64 fp16 elements)
    // pass through DeepSpeed's default 5 swap buffers of the largest
    EXPECT_EQ(current["host_params"].get<std::int64_t>(), 5 * 128 * 2) << rank.dump();
    EXPECT_GT(current["nvme_optimizer"].get<std::int64_t>(), 0) << rank.dump();
  }
  // Without max_in_cpu, DeepSpeed's default (1e9 elements) keeps every shard in host memory.
  std::ofstream(dir_ / "default.json") << with(on_disk, R"("max_in_cpu": 1,)", "");
  const auto in_cpu =
      zerolab(args + (dir_ / "default.json").string() + " --save-final " +
              (dir_ / "in_cpu.st").string() + " --summary " + (dir_ / "in_cpu.json").string());
  ASSERT_EQ(in_cpu.exit_code, 0) << in_cpu.err;
  EXPECT_EQ(test::file_bytes(dir_ / "in_cpu.st"), test::file_bytes(dir_ / "host.st"));
  const auto in_cpu_summary = nlohmann::json::parse(std::ifstream(dir_ / "in_cpu.json"));
  for (const auto& rank : in_cpu_summary["ranks"]) {
    const auto& current = rank["bytes"]["current"];
    EXPECT_EQ(current["nvme_params"].get<std::int64_t>(), 0) << rank.dump();
    EXPECT_EQ(current["host_params"].get<std::int64_t>(), (64 + 128 + 64) * 2) << rank.dump();
  }
  EXPECT_TRUE(fs::is_empty(nvme));
}

// The parameters on NVMe with the optimizer in host memory: the swap table still shows the disk's
// bytes (the parameters' only) and, through one swap buffer, the host peak of one unit's shard.
TEST_F(TrainFeaturesCli, ParametersAloneOnNvmePrintTheSwapTable) {
  const fs::path nvme = dir_ / "nvme";
  fs::create_directories(nvme);
  const auto run = zerolab(
      "train --stage 3 --world 2 --layers 3 --width 12 --in 5 --classes 4 --steps 2 "
      "--offload-optimizer --offload-param --param-buffer-count 1 --param-nvme-path " +
      nvme.string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("swap files on disk"), std::string::npos) << run.out;
  const std::regex row(R"(\n +0 +0 +0 +([0-9]+) +[0-9]+ +[0-9]+ +([0-9]+) )");
  std::smatch said;
  ASSERT_TRUE(std::regex_search(run.out, said, row)) << run.out;
  EXPECT_GT(std::stoll(said[1]), std::stoll(said[2])) << "the disk holds more than one unit";
  EXPECT_TRUE(fs::is_empty(nvme));
}

TEST_F(TrainFeaturesCli, GptSaveDataWritesTheWindowsUsed) {
  const fs::path data = dir_ / "data.safetensors";
  const auto run = zerolab(fmt::format(
      "train --model gpt --n-layer 1 --steps 2 --world 2 --micro-batch 3 --grad-accum 2 --quiet "
      "--save-data {}",
      data.string()));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto tensors = read_safetensors(data);
  const auto& x = find_tensor(tensors, "x");
  const auto& y = find_tensor(tensors, "y");
  EXPECT_EQ(x.shape, (Shape{2 * 2 * 2 * 3, 16}));  // steps * accum * W * B rows of block_size
  EXPECT_EQ(y.shape, x.shape);
  const auto xs = to_int64s(x);
  const auto ys = to_int64s(y);
  for (std::int64_t row = 0; row < x.shape[0]; ++row) {
    for (std::int64_t t = 0; t + 1 < 16; ++t) {
      ASSERT_EQ(ys[row * 16 + t], xs[row * 16 + t + 1]) << row << " " << t;  // next tokens
    }
  }
}

// The shipped ZeRO-3 fp16 config, and the reference with the same settings as flags: identical
// final parameters, byte for byte.
TEST_F(TrainFeaturesCli, DeepSpeedConfigMatchesTheReferenceGivenTheSameFlags) {
  const fs::path zero3 = dir_ / "zero3.safetensors";
  const fs::path reference = dir_ / "reference.safetensors";
  const auto from_config = zerolab(fmt::format(
      "train --config {}/zero3_fp16_accum.json --world 4 --steps 6 --quiet --save-final {}",
      zl::test::configs_dir(), zero3.string()));
  ASSERT_EQ(from_config.exit_code, 0) << from_config.err;
  const auto from_flags = zerolab(fmt::format(
      "train --engine reference --world 4 --steps 6 --micro-batch 4 --grad-accum 4 --clip 1.0 "
      "--fp16 --loss-scale-power 12 --loss-scale-window 500 --hysteresis 2 --min-loss-scale 1 "
      "--lr 6e-4 --beta1 0.9 --beta2 0.95 --eps 1e-8 --weight-decay 0.1 --quiet --save-final {}",
      reference.string()));
  ASSERT_EQ(from_flags.exit_code, 0) << from_flags.err;
  EXPECT_FALSE(slurp(zero3).empty());
  EXPECT_EQ(slurp(zero3), slurp(reference));
  // A flag overrides the file: another learning rate gives other parameters.
  const auto overridden = zerolab(
      fmt::format("train --config {}/zero3_fp16_accum.json --world 4 --steps 6 --lr 1e-3 --quiet "
                  "--save-final {}",
                  zl::test::configs_dir(), zero3.string()));
  ASSERT_EQ(overridden.exit_code, 0) << overridden.err;
  EXPECT_NE(slurp(zero3), slurp(reference));
}

}  // namespace
}  // namespace zl
