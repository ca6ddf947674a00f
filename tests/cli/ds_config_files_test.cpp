// ds_config_files_test.cpp — DeepSpeed configs read from files: every example in docs/configs
// parses cleanly, a missing file is named, real public configs parse or say what to change, and
// the binary exits 2 with one line for a bad config and warns, unless --strict, of unknown keys.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "cli/ds_config.hpp"
#include "core/error.hpp"
#include "support/command.hpp"
#include "support/test_paths.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;

TEST(DsConfig, EveryExampleInDocsConfigsParsesWithoutWarnings) {
  int examples = 0;
  for (const auto& entry : fs::directory_iterator(zl::test::configs_dir())) {
    if (entry.path().extension() != ".json") continue;
    std::vector<std::string> warnings;
    EXPECT_NO_THROW(load_ds_config(entry.path(), warnings)) << entry.path();
    EXPECT_TRUE(warnings.empty()) << entry.path() << ": " << warnings.front();
    ++examples;
  }
  EXPECT_GE(examples, 3);
  std::vector<std::string> warnings;
  const DsConfig zero3 =
      load_ds_config(fs::path(zl::test::configs_dir()) / "zero3_fp16_accum.json", warnings);
  EXPECT_EQ(zero3.engine, EngineKind::Zero3);
  EXPECT_EQ(zero3.precision, DType::F16);
  EXPECT_EQ(zero3.grad_accum_steps, 4);
  EXPECT_EQ(zero3.source, (fs::path(zl::test::configs_dir()) / "zero3_fp16_accum.json").string());
}

TEST(DsConfig, AMissingFileNamesItsPath) {
  std::vector<std::string> warnings;
  try {
    load_ds_config("/nonexistent-dir/ds.json", warnings);
    ADD_FAILURE() << "no error";
  } catch (const Error& error) {
    EXPECT_STREQ(
        error.what(),
        "/nonexistent-dir/ds.json: cannot read the config file: No such file or directory");
  }
  EXPECT_THROW(load_ds_config(fs::temp_directory_path(), warnings), Error);
}

class DsConfigCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("zerolab_ds_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  fs::path write(const std::string& name, const std::string& text) const {
    std::ofstream(dir_ / name) << text;
    return dir_ / name;
  }

  fs::path dir_;
};

// A bad config is a usage error: exit 2, one line on stderr, nothing written.
TEST_F(DsConfigCommand, ABadConfigExitsTwoWithOneLine) {
  const fs::path bad = write("bad.json", R"({"zero_optimization": {"stage": 5}})");
  const fs::path outputs = dir_ / "final.st";
  const std::pair<std::string, std::string> cases[] = {
      {bad.string(),
       fmt::format("{}: zero_optimization.stage is 5: use 0, 1, 2 or 3", bad.string())},
      {(dir_ / "missing.json").string(),
       fmt::format("{}: cannot read the config file: No such file or directory",
                   (dir_ / "missing.json").string())},
      {write("batch.json", R"({"train_batch_size": 7, "train_micro_batch_size_per_gpu": 2})")
           .string(),
       fmt::format("{}: train_batch_size is 7 but train_micro_batch_size_per_gpu 2 * "
                   "gradient_accumulation_steps 1 * world 1 = 2: make them agree (or set "
                   "--micro-batch, --grad-accum, --world)",
                   (dir_ / "batch.json").string())},
  };
  for (const auto& [path, message] : cases) {
    const CommandResult run =
        run_command(fmt::format("{} train --config {} --steps 1 --save-final {}",
                                zl::test::zerolab_binary(), path, outputs.string()));
    EXPECT_EQ(run.exit_code, 2) << path;
    EXPECT_EQ(run.err, fmt::format("zerolab: error: {}\n", message));
    EXPECT_FALSE(fs::exists(outputs));
  }
}

// An unknown key is a warning and the run goes on (a plain fp32 run: no new training feature);
// with --strict it and an unimplemented key are errors, all of them at once.
TEST_F(DsConfigCommand, AnUnknownKeyWarnsAndTheRunContinuesUnlessStrict) {
  const fs::path config =
      write("ds.json", R"({"wall_clock_breakdwn": false, "memory_breakdown": false})");
  const std::string command =
      fmt::format("{} train --config {} --layers 2 --width 4 --in 3 --classes 2 --steps 1 --quiet",
                  zl::test::zerolab_binary(), config.string());
  const CommandResult run = run_command(command);
  EXPECT_EQ(run.exit_code, 0) << run.err;
  const std::string unknown =
      fmt::format("{}: unknown key wall_clock_breakdwn ignored: did you mean wall_clock_breakdown?",
                  config.string());
  const std::string unimplemented = fmt::format(
      "{}: memory_breakdown is a DeepSpeed key zerolab does not implement (zerolab prints each "
      "step and writes --metrics JSON lines; the ledgers count memory and traffic); ignored",
      config.string());
  EXPECT_EQ(run.err,
            fmt::format("zerolab: warning: {}\nzerolab: warning: {}\n", unimplemented, unknown));
  const CommandResult strict =
      run_command(command + " --strict --save-final " + (dir_ / "final.safetensors").string());
  EXPECT_EQ(strict.exit_code, 2);
  EXPECT_EQ(strict.err, fmt::format("zerolab: error: {}; --strict refuses it\n"
                                    "zerolab: error: {}; --strict refuses it\n",
                                    unimplemented, unknown));
  EXPECT_FALSE(fs::exists(dir_ / "final.safetensors"));
}

// Every real config in tests/cli/ds_configs (sources in its SOURCES.md) either parses, with its
// unimplemented and unknown keys as warnings, or is refused with a message naming the key and
// what to use: never a crash or an unexplained error.
TEST(DsConfig, RealConfigsParseOrSayWhatToChange) {
  const fs::path dir = fs::path(zl::test::data_dir()) / "cli" / "ds_configs";
  int parsed = 0, refused = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() != ".json") continue;
    std::vector<std::string> warnings;
    try {
      const DsConfig ds = load_ds_config(entry.path(), warnings);
      TrainConfig config;
      std::int64_t steps_per_print = 1;
      apply_ds_config(ds, config, steps_per_print);
      ++parsed;
    } catch (const Error& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find(entry.path().string() + ": "), std::string::npos) << message;
      EXPECT_TRUE(message.find(": use ") != std::string::npos ||
                  message.find("leave it out") != std::string::npos)
          << message;
      ++refused;
    }
    for (const std::string& warning : warnings) {
      EXPECT_TRUE(warning.find("does not implement") != std::string::npos ||
                  warning.find("unknown key") != std::string::npos ||
                  warning.find("no model parallelism") != std::string::npos)
          << warning;
    }
  }
  EXPECT_EQ(parsed, 29);  // of 31: a Lamb optimizer and bias_correction false are refused
  EXPECT_EQ(refused, 2);
}

}  // namespace
}  // namespace zl
