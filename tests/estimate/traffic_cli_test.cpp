// traffic_cli_test.cpp — `zerolab estimate`'s traffic by link level: its JSON is
// estimate_traffic's (which traffic_measured_test holds to the ledgers) for each stage, flat, in
// shard groups and with ZeRO++; the table prints the same bytes; GPT-2 124M on 4 nodes of 8
// GPUs crosses the nodes with HSDP's one fp32 all_reduce of a node's shard (bad node flags:
// estimate_cli_test).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "engines/estimate.hpp"
#include "engines/estimate_traffic.hpp"
#include "support/command.hpp"
#include "support/test_paths.hpp"

namespace zl {
namespace {

CommandResult zerolab(const std::string& args) {
  return run_command(std::string(zl::test::zerolab_binary()) + " " + args);
}

nlohmann::json traffic_of(const std::string& args) {
  const CommandResult run = zerolab("estimate " + args + " --json");
  EXPECT_EQ(run.exit_code, 0) << args << "\n" << run.err;
  return nlohmann::json::parse(run.out).at("traffic");
}

void expect_json_is_the_estimate(const std::string& args, const TrafficWorld& world,
                                 const TrainingFeatures& features) {
  SCOPED_TRACE(args);
  const nlohmann::json traffic = traffic_of(args);
  const std::vector<UnitSpec> units = checked_units(gpt_preset("tiny"));
  EXPECT_EQ(traffic.at("world"), world.world);
  for (int stage = 0; stage < 4; ++stage) {
    const TrafficEstimate want = estimate_traffic(units, world, features, stage);
    const nlohmann::json& got = traffic.at("stages")[stage];
    EXPECT_EQ(got.at("engine"), want.engine);
    EXPECT_EQ(got.at("inside_bytes"), want.sent_bytes(LinkLevel::Inside));
    EXPECT_EQ(got.at("across_bytes"), want.sent_bytes(LinkLevel::Across));
    EXPECT_EQ(got.at("spanning_bytes"), want.sent_bytes(LinkLevel::Spanning));
    EXPECT_EQ(got.at("total_bytes"), want.sent_bytes());
    ASSERT_EQ(got.at("terms").size(), want.terms.size());
    for (std::size_t t = 0; t < want.terms.size(); ++t) {
      EXPECT_EQ(got.at("terms")[t].at("bytes"), want.terms[t].sent_bytes);
      EXPECT_EQ(got.at("terms")[t].at("level"), link_level_name(want.terms[t].level));
      EXPECT_EQ(got.at("terms")[t].at("formula"), want.terms[t].formula);
    }
  }
}

TEST(EstimateTrafficCli, JsonIsTheEnginesEstimatePerLevel) {
  const std::string gpt = "--model gpt --preset tiny --world 8 --bf16";
  const std::vector<int> order = gpt_forward_order(gpt_preset("tiny"));
  TrainingFeatures features;
  features.precision = DType::BF16;
  expect_json_is_the_estimate(gpt, {.world = 8, .forward_order = order}, features);
  features.node_ranks = 4;
  expect_json_is_the_estimate(gpt + " --gpus-per-node 4",
                              {.world = 8, .gpus_per_node = 4, .forward_order = order}, features);
  TrainingFeatures grouped = features;
  grouped.shard_group_ranks = 4;
  expect_json_is_the_estimate(gpt + " --gpus-per-node 4 --shard-group node",
                              {.world = 8, .gpus_per_node = 4, .forward_order = order}, grouped);
  TrainingFeatures zeropp = features;
  zeropp.hpz_partition_ranks = 4;
  zeropp.quantized_weights = zeropp.quantized_gradients = true;
  expect_json_is_the_estimate(
      gpt +
          " --gpus-per-node 4 --hpz-partition-size 4 --zero-quantized-weights "
          "--zero-quantized-gradients",
      {.world = 8, .gpus_per_node = 4, .forward_order = order}, zeropp);
}

// GPT-2 124M, bf16, on 4 nodes of 8: flat, every stage's ring spans the nodes; with
// --shard-group node only the fp32 all_reduce of each GPU's shard of its node's Psi_p / 8 crosses
// them, 2 (N-1)/N of it. The table prints the JSON's bytes.
TEST(EstimateTrafficCli, HsdpCrossesTheNodesWithOneShardAllReduce) {
  const std::string args = "--model gpt --preset 124M --world 32 --gpus-per-node 8 --bf16";
  const nlohmann::json flat = traffic_of(args);
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_EQ(flat.at("stages")[stage].at("spanning_bytes"),
              flat.at("stages")[stage].at("total_bytes"));
  }
  const CommandResult grouped = zerolab("estimate " + args + " --shard-group node --json");
  ASSERT_EQ(grouped.exit_code, 0) << grouped.err;
  const nlohmann::json json = nlohmann::json::parse(grouped.out);
  const std::int64_t shard_elems = json.at("stages")[3].at("params_bytes").get<std::int64_t>() / 2;
  EXPECT_EQ(json.at("shard_group_ranks"), 8);
  const nlohmann::json& hsdp = json.at("traffic").at("stages")[3];
  EXPECT_EQ(hsdp.at("engine"), "zero3 hsdp, shard groups of 8");
  EXPECT_EQ(hsdp.at("across_bytes").get<std::int64_t>(), 2 * 3 * shard_elems * 4 / 4);
  EXPECT_LT(hsdp.at("across_bytes").get<std::int64_t>() * 8,
            flat.at("stages")[3].at("total_bytes").get<std::int64_t>());

  const CommandResult table = zerolab("estimate " + args + " --shard-group node");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  for (int stage = 0; stage < 4; ++stage) {
    const nlohmann::json& row = json.at("traffic").at("stages")[stage];
    const std::string line = fmt::format("{} {} {} {}", row.at("inside_bytes").get<std::int64_t>(),
                                         row.at("across_bytes").get<std::int64_t>(),
                                         row.at("spanning_bytes").get<std::int64_t>(),
                                         row.at("total_bytes").get<std::int64_t>());
    std::string squeezed;  // the table's rows with single spaces
    for (const char c : table.out) {
      if (c != ' ' || (squeezed.empty() || squeezed.back() != ' ')) squeezed += c;
    }
    EXPECT_NE(squeezed.find(line), std::string::npos) << line << "\n" << table.out;
  }
}

}  // namespace
}  // namespace zl
