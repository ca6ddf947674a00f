// saved_files_cli_test.cpp — the parameter files `zerolab train` writes (--save-init,
// --save-final) carry {"format": "pt"}, which transformers' from_pretrained requires, GPT-2's wte
// in Hugging Face's shape (the padded rows left out), and the model's configuration, which --init
// checks: a GPT file of another head count has the same shapes but is refused, naming the field and
// the flag.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>

#include "ckpt/safetensors.hpp"
#include "support/cli_fixture.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;
using test::CliTest;

const std::string kGpt = "train --model gpt --preset tiny --steps 1 --micro-batch 2 --quiet";

TEST_F(CliTest, SavedParameterFilesCarryFormatAndModelConfiguration) {
  const fs::path init = dir_ / "init.st";
  const fs::path final_file = dir_ / "final.st";
  ASSERT_EQ(zerolab(fmt::format("{} --save-init {} --save-final {}", kGpt, init.string(),
                                final_file.string()))
                .exit_code,
            0);
  const std::map<std::string, std::string> expected = {
      {"format", "pt"}, {"model", "gpt"},      {"n_layer", "2"},    {"n_head", "2"},
      {"n_embd", "32"}, {"n_positions", "16"}, {"vocab_size", "64"}};
  EXPECT_EQ(read_safetensors_file(init).metadata, expected);
  EXPECT_EQ(read_safetensors_file(final_file).metadata, expected);
  // wte in Hugging Face's shape: the vocabulary's 64 rows, not the 128 it is padded to in memory.
  for (const fs::path& file : {init, final_file}) {
    const auto tensors = read_safetensors(file);
    const auto wte = std::ranges::find(tensors, "wte.weight", &TensorRecord::name);
    ASSERT_NE(wte, tensors.end());
    EXPECT_EQ(wte->shape, (Shape{64, 32})) << file;
  }
  const fs::path mlp = dir_ / "mlp.st";
  ASSERT_EQ(zerolab("train " + test::kSmall + " --save-final " + mlp.string()).exit_code, 0);
  EXPECT_EQ(read_safetensors_file(mlp).metadata,
            (std::map<std::string, std::string>{{"format", "pt"},
                                                {"model", "mlp"},
                                                {"layers", "3"},
                                                {"width", "12"},
                                                {"in", "5"},
                                                {"classes", "4"}}));
}

TEST_F(CliTest, InitRefusesAFileOfAnotherModelConfiguration) {
  const fs::path file = dir_ / "final.st";
  ASSERT_EQ(zerolab(fmt::format("{} --save-final {}", kGpt, file.string())).exit_code, 0);
  const auto same = zerolab(fmt::format("{} --init {}", kGpt, file.string()));
  EXPECT_EQ(same.exit_code, 0) << same.err;
  // 4 heads of 8 channels: every shape is the 2-head model's.
  const auto heads = zerolab(fmt::format("{} --n-head 4 --init {}", kGpt, file.string()));
  EXPECT_NE(heads.exit_code, 0);
  EXPECT_EQ(heads.err, fmt::format("zerolab: error: --init {} holds a model with n_head 2, this "
                                   "run's has 4: give --n-head 2 or a file of this run's model\n",
                                   file.string()));
  const auto mlp = zerolab(fmt::format("train {} --init {}", test::kSmall, file.string()));
  EXPECT_NE(mlp.exit_code, 0);
  EXPECT_NE(mlp.err.find("holds a model with model gpt, this run's has mlp: give --model gpt"),
            std::string::npos)
      << mlp.err;
  EXPECT_EQ(std::count(mlp.err.begin(), mlp.err.end(), '\n'), 1) << mlp.err;
}

}  // namespace
}  // namespace zl
