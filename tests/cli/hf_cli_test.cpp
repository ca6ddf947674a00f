// hf_cli_test.cpp — the Hugging Face round trip through the binary: a folder that transformers'
// save_pretrained wrote (tests/fixtures/hf_tiny_gpt2, made by make_hf_fixture.py) starts a run
// with its weights and gives transformers' loss, also saved in shards; its config.json is checked
// against the run's model; and `consolidate --hf` writes a folder of the same kind that --init
// reads back bitwise.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "ckpt/hf_folder.hpp"
#include "ckpt/safetensors.hpp"
#include "support/cli_fixture.hpp"
#include "support/hf_shards.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;
using test::CliTest;

const fs::path kFixture = fs::path(ZL_TEST_DATA_DIR) / "fixtures" / "hf_tiny_gpt2";
const std::string kTinyGpt = "train --model gpt --preset tiny --micro-batch 1 --quiet";

// Tensors by name, a "transformer." prefix dropped.
std::map<std::string, TensorRecord> by_name(const fs::path& file) {
  std::map<std::string, TensorRecord> tensors;
  for (auto& record : read_safetensors(file)) {
    std::string name = record.name;
    if (name.starts_with("transformer.")) name.erase(0, std::string("transformer.").size());
    tensors[name] = std::move(record);
  }
  return tensors;
}

void expect_same_tensors(const fs::path& a, const fs::path& b) {
  const auto left = by_name(a);
  const auto right = by_name(b);
  ASSERT_EQ(left.size(), right.size()) << a << " vs " << b;
  for (const auto& [name, record] : left) {
    ASSERT_TRUE(right.contains(name)) << name;
    EXPECT_EQ(record.shape, right.at(name).shape) << name;
    EXPECT_EQ(record.bytes, right.at(name).bytes) << name;
  }
}

// The loss of each line of a --metrics file.
std::vector<double> losses(const fs::path& metrics) {
  std::vector<double> values;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    values.push_back(nlohmann::json::parse(line)["loss"].get<double>());
  }
  return values;
}

// The fixture's one window (tokens.bin holds block_size + 1 tokens) through the fixture's weights:
// the first step's loss is transformers' loss on it.
TEST_F(CliTest, AHuggingFaceFolderStartsARunWithTransformersLoss) {
  const fs::path init = dir_ / "init.st";
  const fs::path metrics = dir_ / "m.jsonl";
  const auto run = zerolab(fmt::format(
      "{} --steps 1 --init {} --data {} --save-init {} --metrics {}", kTinyGpt, kFixture.string(),
      (kFixture / "tokens.bin").string(), init.string(), metrics.string()));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  expect_same_tensors(init, kFixture / kHfWeightsFile);
  std::ifstream answer_file(kFixture / "answer.json");
  const double answer = nlohmann::json::parse(answer_file)["loss"].get<double>();
  const double loss = nlohmann::json::parse(slurp(metrics))["loss"].get<double>();
  EXPECT_NEAR(loss, answer, 1e-5 * answer);  // fp32 against transformers' float64
}

TEST_F(CliTest, AHuggingFaceConfigOfAnotherModelIsRefused) {
  const auto heads =
      zerolab(fmt::format("{} --steps 1 --n-head 4 --init {}", kTinyGpt, kFixture.string()));
  EXPECT_NE(heads.exit_code, 0);
  EXPECT_EQ(heads.err, fmt::format("zerolab: error: --init {} holds a model with n_head 2, this "
                                   "run's has 4: give --n-head 2 or a file of this run's model\n",
                                   (kFixture / kHfConfigFile).string()));
  const fs::path relu = dir_ / "relu";
  fs::create_directory(relu);
  fs::copy_file(kFixture / kHfWeightsFile, relu / kHfWeightsFile);
  std::ifstream config_file(kFixture / kHfConfigFile);
  nlohmann::json config = nlohmann::json::parse(config_file);
  config["activation_function"] = "relu";
  std::ofstream(relu / kHfConfigFile) << config.dump();
  const auto other = zerolab(fmt::format("{} --steps 1 --init {}", kTinyGpt, relu.string()));
  EXPECT_NE(other.exit_code, 0);
  EXPECT_NE(other.err.find("activation_function \"relu\", but zerolab's GPT uses \"gelu_new\""),
            std::string::npos)
      << other.err;
  EXPECT_EQ(std::count(other.err.begin(), other.err.end(), '\n'), 1) << other.err;
}

// Saved in two shards with their index, the folder trains exactly as from model.safetensors.
TEST_F(CliTest, AShardedHuggingFaceFolderTrainsAsTheWholeFile) {
  const fs::path sharded = dir_ / "sharded";
  test::write_two_shards(kFixture, sharded);
  std::vector<std::string> finals;
  std::vector<std::vector<double>> runs;
  for (const fs::path& folder : {kFixture, sharded}) {
    const fs::path final_file = dir_ / "final.st";
    const fs::path metrics = dir_ / "m.jsonl";
    const auto run = zerolab(fmt::format(
        "{} --steps 3 --init {} --data {} --save-final {} --metrics {}", kTinyGpt, folder.string(),
        (kFixture / "tokens.bin").string(), final_file.string(), metrics.string()));
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(run.err, "");
    finals.push_back(slurp(final_file));
    runs.push_back(losses(metrics));
  }
  EXPECT_EQ(finals[1], finals[0]);
  EXPECT_EQ(runs[1], runs[0]);
  EXPECT_EQ(runs[0].size(), 3U);
}

TEST_F(CliTest, ConsolidateHfWritesAFolderInitReadsBack) {
  const fs::path ck = dir_ / "ck";
  const fs::path final_file = dir_ / "final.st";
  ASSERT_EQ(zerolab(fmt::format("{} --stage 3 --world 2 --steps 2 --checkpoint-dir {} "
                                "--save-final {}",
                                kTinyGpt, ck.string(), final_file.string()))
                .exit_code,
            0);
  const fs::path hf = dir_ / "hf";
  const auto consolidated =
      zerolab(fmt::format("consolidate {} --hf {}", ck.string(), hf.string()));
  ASSERT_EQ(consolidated.exit_code, 0) << consolidated.err;
  // The sizes as transformers wrote them for the same model.
  EXPECT_EQ(hf_config_metadata(hf / kHfConfigFile), hf_config_metadata(kFixture / kHfConfigFile));
  expect_same_tensors(hf / kHfWeightsFile, final_file);
  const fs::path init = dir_ / "init.st";
  const auto resumed = zerolab(
      fmt::format("{} --steps 1 --init {} --save-init {}", kTinyGpt, hf.string(), init.string()));
  ASSERT_EQ(resumed.exit_code, 0) << resumed.err;
  expect_same_tensors(init, final_file);
  // An MLP checkpoint is no GPT-2 folder: refused, writing no weights.
  const fs::path mlp_ck = dir_ / "mlp_ck";
  ASSERT_EQ(
      zerolab("train --stage 1 " + test::kSmall + " --checkpoint-dir " + mlp_ck.string()).exit_code,
      0);
  const auto mlp =
      zerolab(fmt::format("consolidate {} --hf {}", mlp_ck.string(), (dir_ / "mlp_hf").string()));
  EXPECT_NE(mlp.exit_code, 0);
  EXPECT_NE(mlp.err.find("holds an mlp: consolidate it to a file"), std::string::npos) << mlp.err;
  EXPECT_FALSE(fs::exists(dir_ / "mlp_hf" / kHfWeightsFile));
}

}  // namespace
}  // namespace zl
