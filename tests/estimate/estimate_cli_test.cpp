// estimate_cli_test.cpp — runs `zerolab estimate`: the 7B tables as printed, the JSON form, and
// every bad input failing with exactly one line on stderr and a non-zero exit.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/command.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;

CommandResult zerolab(const std::string& args) {
  return run_command(std::string(ZL_BINARY) + " " + args);
}

// Whitespace-separated fields of the table row (below the "stage" header) that starts with
// `stage` ("0 (DDP)", "1", ...).
std::vector<std::string> row(const std::string& out, const std::string& stage) {
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line) && line.rfind("stage ", 0) != 0) {
  }
  while (std::getline(lines, line)) {
    if (line.rfind(stage + " ", 0) != 0) continue;
    std::istringstream words(line.substr(stage.size()));
    std::vector<std::string> fields;
    for (std::string word; words >> word;) fields.push_back(word);
    return fields;
  }
  return {};
}

// Fields after the stage: params_GB grads_GB optimizer_GB total_GB total_bytes formula...
void expect_row(const std::string& out, const std::string& stage,
                const std::vector<std::string>& gb) {
  const auto fields = row(out, stage);
  ASSERT_GE(fields.size(), 5u) << "no row for stage " << stage << " in\n" << out;
  EXPECT_EQ(std::vector<std::string>(fields.begin(), fields.begin() + 4), gb) << out;
}

TEST(EstimateCli, Mixed7BTable) {
  const auto run = zerolab("estimate --params 7e9 --world 8");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  expect_row(run.out, "0 (DDP)", {"14", "14", "84", "112"});
  expect_row(run.out, "1", {"14", "14", "10.5", "38.5"});
  expect_row(run.out, "2", {"14", "1.75", "10.5", "26.25"});
  expect_row(run.out, "3", {"1.75", "1.75", "10.5", "14"});
  EXPECT_EQ(row(run.out, "0 (DDP)")[4], "112000000000");
  EXPECT_NE(run.out.find("1 GB = 1e9 bytes"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("ceil(Ψ/N) = 875000000"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("2Ψ + 2Ψ + 12Ψ/N"), std::string::npos) << run.out;
}

TEST(EstimateCli, Fp327BTable) {
  const auto run = zerolab("estimate --params 7000000000 --world 8 --dtype fp32");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  expect_row(run.out, "0 (DDP)", {"28", "28", "56", "112"});
  expect_row(run.out, "1", {"28", "28", "7", "63"});
  expect_row(run.out, "2", {"28", "3.5", "7", "38.5"});
  expect_row(run.out, "3", {"3.5", "3.5", "7", "14"});
  EXPECT_NE(run.out.find("4Ψ/N + 4Ψ/N + 8Ψ/N"), std::string::npos) << run.out;
}

TEST(EstimateCli, JsonHasEveryStageInBytes) {
  const auto run = zerolab("estimate --params 7e9 --world 8 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json.at("params").get<std::int64_t>(), 7'000'000'000);
  EXPECT_EQ(json.at("world").get<int>(), 8);
  EXPECT_EQ(json.at("dtype").get<std::string>(), "mixed");
  EXPECT_EQ(json.at("optimizer_bytes_per_param").get<int>(), 12);
  const auto& stages = json.at("stages");
  ASSERT_EQ(stages.size(), 4u);
  const std::int64_t totals[] = {112'000'000'000, 38'500'000'000, 26'250'000'000, 14'000'000'000};
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(stages[s].at("stage").get<int>(), s);
    EXPECT_EQ(stages[s].at("total_bytes").get<std::int64_t>(), totals[s]);
    EXPECT_EQ(stages[s].at("params_bytes").get<std::int64_t>() +
                  stages[s].at("grads_bytes").get<std::int64_t>() +
                  stages[s].at("optimizer_bytes").get<std::int64_t>(),
              totals[s]);
  }
  EXPECT_EQ(stages[2].at("grads_bytes").get<std::int64_t>(), 1'750'000'000);
}

TEST(EstimateCli, OptimizerBytesOverrideK) {
  const auto run =
      zerolab("estimate --params 7e9 --world 8 --dtype fp32 --optimizer-bytes 12 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json.at("optimizer_bytes_per_param").get<int>(), 12);
  EXPECT_EQ(json.at("stages")[0].at("optimizer_bytes").get<std::int64_t>(), 84'000'000'000);
  EXPECT_EQ(json.at("stages")[0].at("params_bytes").get<std::int64_t>(), 28'000'000'000);
}

// 16 -> 64 -> 64 -> 8 has 5768 parameters (see estimate_test.cpp); 16 bytes each under DDP.
TEST(EstimateCli, MlpModelCountsItsParameters) {
  const auto run =
      zerolab("estimate --model mlp --layers 3 --width 64 --in 16 --classes 8 --world 4 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json.at("params").get<std::int64_t>(), 5768);
  EXPECT_EQ(json.at("stages")[0].at("total_bytes").get<std::int64_t>(), 5768 * 16);
  EXPECT_EQ(json.at("stages")[3].at("total_bytes").get<std::int64_t>(), 1442 * 16);
  // The table prints exact decimal GB, so small models do not show as 0.
  const auto table =
      zerolab("estimate --model mlp --layers 3 --width 64 --in 16 --classes 8 --world 4");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  expect_row(table.out, "0 (DDP)", {"0.000011536", "0.000011536", "0.000069216", "0.000092288"});
  EXPECT_NE(table.out.find("(mlp: layers 3, in 16, width 64, classes 8)"), std::string::npos)
      << table.out;
}

TEST(EstimateCli, AQuadrillionParametersFit) {
  const auto run = zerolab("estimate --params 1e15 --world 1 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out).at("stages")[3].at("total_bytes").get<std::int64_t>(),
            16'000'000'000'000'000);
}

TEST(EstimateCli, BadInputFailsWithOneLine) {
  const std::string bad[] = {
      "estimate --params 0 --world 8",
      "estimate --params -7 --world 8",
      "estimate --params=-7e9 --world 8",
      "estimate --params 7.5 --world 8",
      "estimate --params 7e9x --world 8",
      "estimate --params 1e30 --world 8",
      "estimate --params 7e9 --world 0",
      "estimate --params 7e9 --world -2",
      "estimate --params 7e9",
      "estimate --params 7e9 --world 8 --optimizer-bytes 0",
      "estimate --params 7e9 --world 8 --optimizer-bytes -4",
      "estimate --params 7e9 --world 8 --dtype fp16",
      "estimate --params 7e9 --model mlp --world 8",
      "estimate --world 8",
      "estimate --model gpt --world 8",
      "estimate --params 7e9 --layers 3 --world 8",
      "estimate --params 1e15 --world 8 --optimizer-bytes 2000000000",
      "estimate --params 99999999999999999999 --world 8",
  };
  for (const auto& args : bad) {
    const auto run = zerolab(args);
    EXPECT_NE(run.exit_code, 0) << args;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << args << "\n" << run.err;
    EXPECT_EQ(run.err.rfind("zerolab: ", 0), 0u) << args << "\n" << run.err;
    EXPECT_EQ(run.out, "") << args;
  }
}

}  // namespace
}  // namespace zl
