// hf_cli_test.cpp — the Hugging Face round trip through the binary: a folder that transformers'
// save_pretrained wrote (tests/fixtures/hf_tiny_gpt2, made by make_hf_fixture.py) starts a run
// with its weights and gives transformers' loss, also saved in shards; its config.json is checked
// against the run's model (an untied head refused, dropout a warning); a head unlike wte, a bf16
// tensor, a folder of PyTorch pickles and a folder's config.json given as the weights are
// refused in one line; and `consolidate --hf` writes a folder that --init reads back bitwise.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>

#include "ckpt/hf_folder.hpp"
#include "ckpt/safetensors.hpp"
#include "support/cli_fixture.hpp"
#include "support/hf_shards.hpp"
#include "support/test_paths.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;
using test::CliTest;

const fs::path kFixture = fs::path(zl::test::data_dir()) / "fixtures" / "hf_tiny_gpt2";
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

// A copy of the fixture folder at `to`: its config.json after `edit_config`, its model.safetensors
// after `edit_tensors` (each left as it is when not given).
fs::path fixture_copy(const fs::path& to, const std::function<void(nlohmann::json&)>& edit_config,
                      const std::function<void(std::vector<TensorRecord>&)>& edit_tensors = {}) {
  fs::create_directory(to);
  std::ifstream config_file(kFixture / kHfConfigFile);
  nlohmann::json config = nlohmann::json::parse(config_file);
  if (edit_config) edit_config(config);
  std::ofstream(to / kHfConfigFile) << config.dump(2);
  SafetensorsFile weights = read_safetensors_file(kFixture / kHfWeightsFile);
  if (edit_tensors) edit_tensors(weights.tensors);
  write_safetensors(to / kHfWeightsFile, weights.tensors, weights.metadata);
  return to;
}

// `tensors` with an lm_head.weight: wte.weight's values times `scale`.
void add_head(std::vector<TensorRecord>& tensors, float scale) {
  const TensorRecord& wte = find_tensor(tensors, "transformer.wte.weight");
  std::vector<float> values = to_floats(wte);
  for (float& value : values) value *= scale;
  tensors.push_back(make_tensor("lm_head.weight", wte.shape, values));
}

// The record called `name` in bf16: the upper half of each fp32 value (bf16 truncates).
void to_bf16(std::vector<TensorRecord>& tensors, const std::string& name) {
  const auto found = std::ranges::find(tensors, name, &TensorRecord::name);
  ASSERT_NE(found, tensors.end()) << name;
  std::vector<std::byte> halves;
  for (std::size_t i = 0; i < found->bytes.size(); i += sizeof(float)) {
    halves.insert(halves.end(), found->bytes.begin() + static_cast<std::ptrdiff_t>(i + 2),
                  found->bytes.begin() + static_cast<std::ptrdiff_t>(i + 4));
  }
  found->dtype = DType::BF16;
  found->bytes = std::move(halves);
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
  const fs::path relu = fixture_copy(
      dir_ / "relu", [](nlohmann::json& config) { config["activation_function"] = "relu"; });
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

// transformers' GPT-2 with tie_word_embeddings false has its own lm_head.weight; zerolab's GPT
// computes the head with wte, so such a folder is refused, not trained with the wrong head.
TEST_F(CliTest, AnUntiedHuggingFaceHeadIsRefused) {
  const fs::path untied = fixture_copy(
      dir_ / "untied", [](nlohmann::json& config) { config["tie_word_embeddings"] = false; },
      [](std::vector<TensorRecord>& tensors) { add_head(tensors, 2.0f); });
  const fs::path metrics = dir_ / "m.jsonl";
  const auto run = zerolab(fmt::format("{} --steps 1 --init {} --metrics {}", kTinyGpt,
                                       untied.string(), metrics.string()));
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_EQ(run.err, fmt::format("zerolab: error: {}: tie_word_embeddings false, but zerolab's GPT "
                                 "ties the head to wte (an untied lm_head is not built): give a "
                                 "GPT-2 whose head is tied\n",
                                 (untied / kHfConfigFile).string()));
  EXPECT_FALSE(fs::exists(metrics));
}

// A tied folder may hold lm_head.weight as well (transformers ignores it when it is wte); one
// unlike wte is refused, as transformers' versions disagree on which of the two they use.
TEST_F(CliTest, AHuggingFaceHeadMustEqualWte) {
  const fs::path same = fixture_copy(
      dir_ / "same", [](nlohmann::json& config) { config.erase("tie_word_embeddings"); },
      [](std::vector<TensorRecord>& tensors) { add_head(tensors, 1.0f); });
  const fs::path init = dir_ / "init.st";
  const auto tied = zerolab(
      fmt::format("{} --steps 1 --init {} --save-init {}", kTinyGpt, same.string(), init.string()));
  ASSERT_EQ(tied.exit_code, 0) << tied.err;
  expect_same_tensors(init, kFixture / kHfWeightsFile);
  const fs::path other = fixture_copy(
      dir_ / "other", {}, [](std::vector<TensorRecord>& tensors) { add_head(tensors, 2.0f); });
  const auto run = zerolab(fmt::format("{} --steps 1 --init {}", kTinyGpt, other.string()));
  EXPECT_EQ(run.exit_code, 3);
  EXPECT_EQ(run.err, fmt::format("zerolab: error: {}: lm_head.weight differs from "
                                 "transformer.wte.weight, but zerolab's GPT ties the head to wte: "
                                 "give weights without lm_head.weight or with it equal to "
                                 "transformer.wte.weight\n",
                                 (other / kHfWeightsFile).string()));
}

// GPT2Config's default dropout (0.1) trains here without dropout: said once, then the run is the
// fixture's.
TEST_F(CliTest, HuggingFaceDropoutIsOneWarning) {
  const fs::path dropout = fixture_copy(dir_ / "dropout", [](nlohmann::json& config) {
    for (const char* key : {"resid_pdrop", "embd_pdrop", "attn_pdrop"}) config[key] = 0.1;
  });
  const fs::path metrics = dir_ / "m.jsonl";
  const auto run =
      zerolab(fmt::format("{} --steps 1 --init {} --data {} --metrics {}", kTinyGpt,
                          dropout.string(), (kFixture / "tokens.bin").string(), metrics.string()));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, fmt::format("zerolab: warning: {}: zerolab trains without dropout: "
                                 "resid_pdrop 0.1, embd_pdrop 0.1, attn_pdrop 0.1 ignored\n",
                                 (dropout / kHfConfigFile).string()));
  std::ifstream answer_file(kFixture / "answer.json");
  const double answer = nlohmann::json::parse(answer_file)["loss"].get<double>();
  EXPECT_NEAR(losses(metrics).at(0), answer, 1e-5 * answer);
}

// What --init cannot start from is one line naming the file (and the tensor), exit code 3: a
// bf16 tensor (in model.safetensors or in a shard), a NaN in a shard, a folder of PyTorch
// pickles, a sharded folder missing a shard, and a folder's config.json or index given instead
// of the folder.
TEST_F(CliTest, HuggingFaceFilesInitCannotReadAreOneLine) {
  const auto refused = [&](const fs::path& init, const std::string& message) {
    const auto run = zerolab(fmt::format("{} --steps 1 --init {}", kTinyGpt, init.string()));
    EXPECT_EQ(run.exit_code, 3) << init;
    EXPECT_EQ(run.err, "zerolab: error: " + message + "\n");
  };
  const std::string bf16_name = "transformer.h.1.mlp.c_fc.weight";
  const fs::path bf16 = fixture_copy(
      dir_ / "bf16", {}, [&](std::vector<TensorRecord>& tensors) { to_bf16(tensors, bf16_name); });
  const auto bf16_message = [&](const fs::path& file) {
    return fmt::format(
        "{}: tensor {} is bf16, but --init reads fp32 weights: save them in fp32 "
        "(transformers: model.float().save_pretrained(DIR))",
        file.string(), bf16_name);
  };
  refused(bf16, bf16_message(bf16 / kHfWeightsFile));
  const fs::path sharded = dir_ / "sharded";
  const nlohmann::json index = test::write_two_shards(bf16, sharded);
  refused(sharded, bf16_message(sharded / index["weight_map"][bf16_name].get<std::string>()));

  // A parameter the model cannot start from is named with its shard.
  const std::string nan_name = "transformer.ln_f.weight";
  const fs::path nan = fixture_copy(dir_ / "nan", {}, [&](std::vector<TensorRecord>& tensors) {
    const float value = NAN;
    std::memcpy(std::ranges::find(tensors, nan_name, &TensorRecord::name)->bytes.data(), &value,
                sizeof(float));
  });
  const fs::path nan_sharded = dir_ / "nan_sharded";
  const nlohmann::json nan_index = test::write_two_shards(nan, nan_sharded);
  refused(nan_sharded,
          fmt::format("{}: {} element 0 is nan: initial parameters must be finite: give a file "
                      "without NaN or infinite values",
                      (nan_sharded / nan_index["weight_map"][nan_name].get<std::string>()).string(),
                      nan_name));

  const fs::path pickles = dir_ / "pickles";
  fs::create_directory(pickles);
  fs::copy_file(kFixture / kHfConfigFile, pickles / kHfConfigFile);
  std::ofstream(pickles / "pytorch_model.bin") << "PK";
  refused(pickles, pickles.string() +
                       " holds only pytorch_model.bin: zerolab reads safetensors: convert it with "
                       "transformers (from_pretrained, then save_pretrained(DIR, "
                       "safe_serialization=True))");

  fs::remove(sharded / test::kSecondShard);
  refused(sharded,
          fmt::format(
              "{} places tensor {} in {}, but {} has no such file: copy every shard the "
              "index names into the folder",
              (sharded / kHfIndexFile).string(),
              std::find(index["weight_map"].begin(), index["weight_map"].end(), test::kSecondShard)
                  .key(),
              test::kSecondShard, sharded.string()));

  for (const std::string_view name : {kHfConfigFile, kHfIndexFile}) {
    refused(sharded / name,
            fmt::format("--init {} is a Hugging Face folder's {}, not its weights: give the folder "
                        "(--init {})",
                        (sharded / name).string(), name, sharded.string()));
  }
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
