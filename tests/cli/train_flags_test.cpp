// train_flags_test.cpp — `zerolab train` flags parsed into a TrainConfig without training: each
// new flag lands in its field, bad values are one-line errors naming the flag, the GPT preset and
// its size flags, and flags override --config whichever side of it they stand.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/train_command.hpp"
#include "core/error.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;

// "--a 1 --b" as {"--a", "1", "--b"}.
std::vector<std::string> words(std::string_view line) {
  std::vector<std::string> out;
  std::istringstream in{std::string(line)};
  for (std::string word; in >> word;) out.push_back(word);
  return out;
}

// The message zl::Error or CLI::ParseError gives for `args` ("" if parsing succeeds).
std::string error_of(const std::vector<std::string>& args) {
  try {
    parse_train_args(args);
  } catch (const Error& error) {
    return error.what();
  } catch (const CLI::ParseError& error) {
    return error.what();
  }
  return "";
}

TEST(TrainFlags, WithoutNewFlagsTheFeaturesKeepTheirDefaults) {
  const TrainArgs args = parse_train_args({});
  const TrainingFeatures defaults;
  const TrainingFeatures& f = args.config.features;
  EXPECT_EQ(args.config.model, ModelKind::Mlp);
  EXPECT_EQ(f.precision, DType::F32);
  EXPECT_EQ(f.grad_accum_steps, 1);
  EXPECT_EQ(f.grad_clip, 0.0);
  EXPECT_EQ(f.reduce_bucket_elems, defaults.reduce_bucket_elems);
  EXPECT_EQ(f.persistence_threshold_elems, defaults.persistence_threshold_elems);
  EXPECT_EQ(args.outputs.steps_per_print, 1);
  EXPECT_FALSE(args.ds_config.has_value());
}

TEST(TrainFlags, EachFeatureFlagSetsItsField) {
  const TrainArgs args = parse_train_args(
      words("--precision fp16 --loss-scale-power 10 --loss-scale-window 50 --hysteresis 4 "
            "--min-loss-scale 0.5 --grad-accum 3 --clip 1.5 --reduce-bucket 1000 "
            "--allgather-bucket 5e8 --prefetch-bucket 0 --persistence-threshold 64 "
            "--steps-per-print 5"));
  const TrainingFeatures& f = args.config.features;
  EXPECT_EQ(f.precision, DType::F16);
  EXPECT_EQ(f.loss_scale.initial_scale_power, 10);
  EXPECT_EQ(f.loss_scale.window, 50);
  EXPECT_EQ(f.loss_scale.hysteresis, 4);
  EXPECT_EQ(f.loss_scale.min_scale, 0.5);
  EXPECT_EQ(f.grad_accum_steps, 3);
  EXPECT_EQ(f.grad_clip, 1.5);
  EXPECT_EQ(f.reduce_bucket_elems, 1000);
  EXPECT_EQ(f.allgather_bucket_elems, 500'000'000);
  EXPECT_EQ(f.prefetch_bucket_elems, 0);
  EXPECT_EQ(f.persistence_threshold_elems, 64);
  EXPECT_EQ(args.outputs.steps_per_print, 5);
  EXPECT_EQ(parse_train_args({"--bf16"}).config.features.precision, DType::BF16);
  EXPECT_EQ(parse_train_args({"--fp16"}).config.features.precision, DType::F16);
  EXPECT_EQ(parse_train_args({"--precision", "BF16"}).config.features.precision, DType::BF16);
  EXPECT_EQ(parse_train_args({"--precision", "fp32"}).config.features.precision, DType::F32);
  EXPECT_EQ(parse_train_args({}).config.attention, AttentionKind::Default);
  EXPECT_EQ(parse_train_args({"--model", "gpt", "--attention", "fast"}).config.attention,
            AttentionKind::Fast);
  EXPECT_EQ(parse_train_args({"--model", "gpt", "--attention", "EXACT"}).config.attention,
            AttentionKind::Exact);
}

TEST(TrainFlags, BadValuesAreOneLineErrorsNamingTheFlag) {
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--grad-accum", "0"}, "--grad-accum 0 is invalid: use 1 or more micro-batches per step"},
      {{"--clip", "-1"}, "--clip -1 is invalid: use a norm >= 0 (0: no clipping)"},
      {{"--loss-scale-power", "64"}, "--loss-scale-power 64 is invalid: use 0 to 63"},
      {{"--loss-scale-window", "0"}, "--loss-scale-window 0 is invalid: use 1 or more steps"},
      {{"--hysteresis", "0"}, "--hysteresis 0 is invalid: use 1 or more overflows"},
      {{"--min-loss-scale", "0"}, "--min-loss-scale 0 is invalid: use a number > 0"},
      {{"--reduce-bucket", "1.5"}, "--reduce-bucket 1.5 is invalid: use 1 or more elements"},
      {{"--reduce-bucket", "0"}, "--reduce-bucket 0 is invalid: use 1 or more elements"},
      {{"--allgather-bucket", "lots"},
       "--allgather-bucket lots is invalid: use 1 or more elements"},
      {{"--prefetch-bucket", "-1"},
       "--prefetch-bucket -1 is invalid: use 0 (no prefetch) or more elements"},
      {{"--persistence-threshold", "1e30"},
       "--persistence-threshold 1e30 is invalid: use 0 or more elements"},
      {{"--steps-per-print", "0"}, "--steps-per-print 0 is invalid: use 1 or more steps"},
      {{"--n-layer", "0", "--model", "gpt"}, "--n-layer 0 is invalid: use 1 or more"},
      {{"--n-layer", "2"}, "--n-layer needs --model gpt"},
      {{"--preset", "tiny"}, "--preset needs --model gpt"},
      {{"--data", "tokens.bin"}, "--data needs --model gpt"},
      {{"--attention", "exact"}, "--attention needs --model gpt"},
  };
  for (const auto& [args, message] : cases) EXPECT_EQ(error_of(args), message) << args[0];
  EXPECT_NE(error_of({"--bf16", "--fp16"}).find("excludes"), std::string::npos);
  EXPECT_NE(error_of({"--precision", "bf16", "--fp16"}).find("excludes"), std::string::npos);
  EXPECT_NE(error_of({"--precision", "fp8"}).find("fp8"), std::string::npos);
  EXPECT_NE(error_of({"--model", "rnn"}).find("rnn"), std::string::npos);
}

// --model gpt starts from the tiny preset; --preset picks another; size flags override it.
TEST(TrainFlags, GptPresetAndSizeFlags) {
  const TrainArgs tiny = parse_train_args({"--model", "gpt"});
  EXPECT_EQ(tiny.config.model, ModelKind::Gpt);
  const GptConfig expected = gpt_preset("tiny");
  EXPECT_EQ(tiny.config.gpt.n_layer, expected.n_layer);
  EXPECT_EQ(tiny.config.gpt.n_embd, expected.n_embd);
  EXPECT_EQ(tiny.config.gpt.vocab, expected.vocab);

  const TrainArgs sized = parse_train_args(
      words("--model gpt --preset small --n-layer 3 --n-head 2 --n-embd 48 --block-size 8 "
            "--vocab 100 --data tokens.bin"));
  const GptConfig small = gpt_preset("small");
  EXPECT_NE(small.n_layer, 3);
  EXPECT_EQ(sized.config.gpt.n_layer, 3);
  EXPECT_EQ(sized.config.gpt.n_head, 2);
  EXPECT_EQ(sized.config.gpt.n_embd, 48);
  EXPECT_EQ(sized.config.gpt.block_size, 8);
  EXPECT_EQ(sized.config.gpt.vocab, 100);
  EXPECT_EQ(sized.config.data, "tokens.bin");
  const TrainArgs preset_only = parse_train_args({"--model", "gpt", "--preset", "small"});
  EXPECT_EQ(preset_only.config.gpt.n_layer, small.n_layer);
  EXPECT_EQ(preset_only.config.gpt.block_size, small.block_size);

  EXPECT_NE(error_of({"--model", "gpt", "--preset", "huge"}).find("huge"), std::string::npos);
  EXPECT_NE(error_of({"--model", "gpt", "--n-head", "3", "--n-embd", "32"}), "");  // 32 % 3 != 0
}

class TrainFlagsWithConfig : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("zerolab_flags_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(file()) << R"({
      "train_micro_batch_size_per_gpu": 8,
      "gradient_accumulation_steps": 2,
      "steps_per_print": 10,
      "fp16": {"enabled": true, "initial_scale_power": 12},
      "zero_optimization": {"stage": 3, "reduce_bucket_size": 1e6, "foo": 1},
      "optimizer": {"type": "AdamW", "params": {"lr": 0.01, "betas": [0.8, 0.9]}}
    })";
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string file() const { return (dir_ / "ds.json").string(); }

  fs::path dir_;
};

TEST_F(TrainFlagsWithConfig, TheFileSetsWhatNoFlagSets) {
  const TrainArgs args = parse_train_args({"--config", file()});
  EXPECT_EQ(args.config.micro_batch, 8);
  EXPECT_EQ(args.config.features.grad_accum_steps, 2);
  EXPECT_EQ(args.config.features.precision, DType::F16);
  EXPECT_EQ(args.config.features.loss_scale.initial_scale_power, 12);
  EXPECT_EQ(args.config.engine, EngineKind::Zero3);
  EXPECT_EQ(args.config.features.reduce_bucket_elems, 1'000'000);
  EXPECT_EQ(args.config.adamw.lr, 0.01);
  EXPECT_EQ(args.config.adamw.weight_decay, 0.0);  // DeepSpeed's default for a given optimizer
  EXPECT_EQ(args.outputs.steps_per_print, 10);
  ASSERT_TRUE(args.ds_config.has_value());
  EXPECT_EQ(args.config_warnings,
            std::vector<std::string>{file() + ": unknown key zero_optimization.foo ignored"});
}

// Flags override the file whether they come before or after --config.
TEST_F(TrainFlagsWithConfig, FlagsOverrideTheFileOnEitherSide) {
  const std::vector<std::string> flags =
      words("--micro-batch 3 --bf16 --stage 1 --lr 0.5 --reduce-bucket 77 --steps-per-print 2");
  for (const bool flags_first : {true, false}) {
    std::vector<std::string> args = flags;
    const std::vector<std::string> config = {"--config", file()};
    args.insert(flags_first ? args.end() : args.begin(), config.begin(), config.end());
    const TrainArgs parsed = parse_train_args(args);
    EXPECT_EQ(parsed.config.micro_batch, 3) << flags_first;
    EXPECT_EQ(parsed.config.features.precision, DType::BF16);
    EXPECT_EQ(parsed.config.engine, EngineKind::Zero1);
    EXPECT_EQ(parsed.config.adamw.lr, 0.5);
    EXPECT_EQ(parsed.config.adamw.beta1, 0.8);  // from the file: no flag set it
    EXPECT_EQ(parsed.config.features.reduce_bucket_elems, 77);
    EXPECT_EQ(parsed.config.features.grad_accum_steps, 2);
    EXPECT_EQ(parsed.outputs.steps_per_print, 2);
  }
  EXPECT_EQ(parse_train_args({"--engine", "reference", "--config", file()}).config.engine,
            EngineKind::Reference);
}

// train_batch_size is checked against the flags too: the world comes only from --world.
TEST_F(TrainFlagsWithConfig, TrainBatchSizeCountsTheFlags) {
  std::ofstream(file()) << R"({"train_batch_size": 32, "train_micro_batch_size_per_gpu": 4,
                               "gradient_accumulation_steps": 2})";
  EXPECT_EQ(error_of({"--config", file(), "--world", "4"}), "");
  EXPECT_EQ(error_of({"--config", file(), "--world", "2", "--grad-accum", "4"}), "");
  EXPECT_EQ(error_of({"--config", file()}),
            file() +
                ": train_batch_size is 32 but train_micro_batch_size_per_gpu 4 * "
                "gradient_accumulation_steps 2 * world 1 = 8: make them agree (or set "
                "--micro-batch, --grad-accum, --world)");
}

TEST_F(TrainFlagsWithConfig, ABadOrMissingFileIsAnError) {
  EXPECT_EQ(
      error_of({"--config", (dir_ / "none.json").string()}),
      (dir_ / "none.json").string() + ": cannot read the config file: No such file or directory");
  std::ofstream(file()) << R"({"zero_optimization": {"offload_optimizer": {"device": "nvme"}}})";
  EXPECT_EQ(error_of({"--config", file()}),
            file() +
                ": zero_optimization.offload_optimizer.device is nvme but it has no "
                "nvme_path: add the folder for its swap files");
}

}  // namespace
}  // namespace zl
