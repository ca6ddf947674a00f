// bench_command_test.cpp — `zerolab bench`: the size and world parsers, nccl-tests' bus-bandwidth
// factors and the shared-memory ideal, and each benchmark end to end on sizes small enough for
// CI, checking the JSON's shape and its arithmetic, never its speed.
#include "cli/bench_command.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/collectives_bench.hpp"
#include "core/error.hpp"
#include "support/command.hpp"
#include "support/test_paths.hpp"

namespace zl {
namespace {

nlohmann::json run_json(const std::string& args) {
  const CommandResult result =
      run_command(std::string(zl::test::zerolab_binary()) + " bench " + args);
  EXPECT_EQ(result.exit_code, 0) << result.err;
  return nlohmann::json::parse(result.out);
}

TEST(BenchParse, SizesTakeBinarySuffixes) {
  EXPECT_EQ(parse_size_bytes("4096", "--min-bytes"), 4096u);
  EXPECT_EQ(parse_size_bytes("4K", "--min-bytes"), 4096u);
  EXPECT_EQ(parse_size_bytes("4kib", "--min-bytes"), 4096u);
  EXPECT_EQ(parse_size_bytes("64M", "--max-bytes"), std::size_t{64} << 20);
  EXPECT_EQ(parse_size_bytes("1G", "--max-bytes"), std::size_t{1} << 30);
  for (const char* bad : {"", "0", "4X", "-4K", "K", "4.5M"}) {
    EXPECT_THROW(parse_size_bytes(bad, "--max-bytes"), Error) << bad;
  }
}

TEST(BenchParse, WorldsAreRangesOrLists) {
  EXPECT_EQ(parse_worlds("2..8", "--worlds"), (std::vector<int>{2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(parse_worlds("2,4,8", "--worlds"), (std::vector<int>{2, 4, 8}));
  EXPECT_EQ(parse_worlds("4", "--worlds"), (std::vector<int>{4}));
  for (const char* bad : {"", "8..2", "0", "2,,4", "2..", "a"}) {
    EXPECT_THROW(parse_worlds(bad, "--worlds"), Error) << bad;
  }
}

// nccl-tests, doc/PERFORMANCE.md: all_reduce 2(n-1)/n, reduce_scatter and all_gather (n-1)/n.
TEST(BenchCollectives, BusBandwidthFactorsAreNcclTests) {
  EXPECT_DOUBLE_EQ(bench::busbw_factor("all_reduce", 8), 2.0 * 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(bench::busbw_factor("reduce_scatter", 8), 7.0 / 8.0);
  EXPECT_DOUBLE_EQ(bench::busbw_factor("all_gather", 2), 0.5);
  // The ideal: 2(W-1)/W^2 for all_reduce, 2(W-1)/(W(W+1)) for the others.
  EXPECT_DOUBLE_EQ(bench::ideal_busbw_fraction("all_reduce", 2), 0.5);
  EXPECT_DOUBLE_EQ(bench::ideal_busbw_fraction("all_reduce", 8), 14.0 / 64.0);
  EXPECT_DOUBLE_EQ(bench::ideal_busbw_fraction("all_gather", 2), 1.0 / 3.0);
}

TEST(BenchCli, AdamJsonHasTheIssuesKeys) {
  const auto out = run_json("adam --params 100000 --threads 2 --repeats 2 --no-torch --json");
  EXPECT_EQ(out["params"], 100000);
  EXPECT_EQ(out["threads"], 2);
  EXPECT_GT(out["ms"].get<double>(), 0.0);
  EXPECT_NEAR(out["gbps"].get<double>(), 28.0 * 100000 / (out["ms"].get<double>() * 1e6), 1e-9);
  EXPECT_GT(out["triad_gbps"].get<double>(), 0.0);
  EXPECT_TRUE(out["torch"].is_null());
  EXPECT_EQ(out["torch_note"], "no PyTorch comparison: --no-torch");
}

TEST(BenchCli, AMissingTorchScriptIsSaidNotFailed) {
  const auto out = run_json(
      "adam --params 1000 --repeats 1 --reference-repeats 0 --torch-script /nonexistent.py "
      "--json");
  EXPECT_TRUE(out["torch"].is_null());
  EXPECT_NE(out["torch_note"].get<std::string>().find("not found"), std::string::npos);
}

TEST(BenchCli, CollectivesRowsFollowTheDefinitions) {
  const auto out = run_json(
      "collectives --worlds 2,3 --min-bytes 4K --max-bytes 16K "
      "--budget-ms 1 --json");
  EXPECT_GT(out["memcpy_gbps"].get<double>(), 0.0);
  EXPECT_GE(out["memcpy_threads"].get<int>(), 1);
  const auto& rows = out["rows"];
  ASSERT_EQ(rows.size(), 3u * 2u * 2u);  // ops x worlds x sizes (4K, 16K)
  for (const auto& row : rows) {
    const std::string op = row["op"];
    const int world = row["world"];
    const double ms = row["ms"];
    ASSERT_GT(ms, 0.0) << row.dump();
    EXPECT_NEAR(row["algbw_gbps"].get<double>(), row["bytes"].get<double>() / (ms * 1e6), 1e-9);
    EXPECT_NEAR(row["busbw_gbps"].get<double>(),
                row["algbw_gbps"].get<double>() * bench::busbw_factor(op, world), 1e-9);
    EXPECT_GT(row["memcpy_gbps"].get<double>(), 0.0);
    EXPECT_NEAR(row["ideal_busbw_gbps"].get<double>(),
                row["memcpy_gbps"].get<double>() * bench::ideal_busbw_fraction(op, world), 1e-9);
    EXPECT_NEAR(row["busbw_over_ideal"].get<double>(),
                row["busbw_gbps"].get<double>() / row["ideal_busbw_gbps"].get<double>(), 1e-9);
    // Bytes are whole fp32 blocks: 4K over 3 ranks rounds down to 3 * 341 * 4.
    if (op != "all_reduce") {
      EXPECT_EQ(row["bytes"].get<std::size_t>() % (4u * static_cast<std::size_t>(world)), 0u);
    }
  }
  EXPECT_EQ(rows[2]["op"], "all_reduce");
  EXPECT_EQ(rows[2]["world"], 3);
  EXPECT_EQ(rows[4]["bytes"], 4096);  // reduce_scatter, world 2, 4K
  // A 4 KiB latency per op and world, in the rows' order.
  const auto& latencies = out["latencies"];
  ASSERT_EQ(latencies.size(), 3u * 2u);  // ops x worlds
  const std::vector<std::string> ops = {"all_reduce", "reduce_scatter", "all_gather"};
  for (std::size_t i = 0; i < latencies.size(); ++i) {
    EXPECT_EQ(latencies[i]["op"], ops[i / 2]) << latencies[i].dump();
    EXPECT_EQ(latencies[i]["world"], i % 2 == 0 ? 2 : 3) << latencies[i].dump();
    EXPECT_GT(latencies[i]["us"].get<double>(), 0.0) << latencies[i].dump();
  }
  EXPECT_EQ(latencies[0]["bytes"], 4096);
  EXPECT_EQ(latencies[3]["bytes"], 3 * 341 * 4);  // reduce_scatter, world 3: whole fp32 blocks
}

TEST(BenchCli, CollectivesTableShowsTheIdealAndLatency) {
  const CommandResult result = run_command(std::string(zl::test::zerolab_binary()) +
                                           " bench collectives --worlds 2 --min-bytes 4K "
                                           "--max-bytes 4K --budget-ms 1");
  ASSERT_EQ(result.exit_code, 0) << result.err;
  for (const char* column : {"busbw_GB/s", "ideal_GB/s", "/ideal", "latency of one 4K call"}) {
    EXPECT_NE(result.out.find(column), std::string::npos) << column << " in\n" << result.out;
  }
}

TEST(BenchCli, StepReportsEveryStageAgainstDdp) {
  const auto out = run_json("step --model gpt --preset tiny --world 2 --steps 2 --rounds 1 --json");
  ASSERT_EQ(out["rows"].size(), 4u);
  EXPECT_EQ(out["rows"][0]["engine"], "ddp");
  EXPECT_DOUBLE_EQ(out["rows"][0]["overhead_vs_ddp"].get<double>(), 1.0);
  for (const auto& row : out["rows"]) {
    EXPECT_NEAR(row["overhead_vs_ddp"].get<double>(),
                row["ms"].get<double>() / out["rows"][0]["ms"].get<double>(), 1e-12);
    // GFLOP/s is the step's GFLOP over its seconds, of_gemm its share of the GEMM rate.
    EXPECT_NEAR(row["gflops"].get<double>(),
                out["step_gflop"].get<double>() / (row["ms"].get<double>() / 1e3), 1e-9);
    EXPECT_NEAR(row["of_gemm"].get<double>(),
                row["gflops"].get<double>() / out["gemm_gflops"].get<double>(), 1e-12);
  }
  EXPECT_GT(out["gemm_gflops"].get<double>(), 0.0);
  EXPECT_GE(out["cores"].get<int>(), 1);
  EXPECT_EQ(out["threads"].get<int>(), std::max(1, out["cores"].get<int>() / 2));  // cores / W
  EXPECT_FALSE(out["gemm_isa"].get<std::string>().empty());
}

// Each stage's row counts the host waits of its steps: none on the CPU; on cpu-detached, which
// counts what a GPU waits for, two at every stage with one rank (the loss and the gradient norm).
TEST(BenchCli, StepCountsTheHostWaitsOfEveryStage) {
  const auto cpu = run_json("step --model gpt --preset tiny --world 1 --steps 2 --rounds 1 --json");
  const auto detached = run_json(
      "step --model gpt --preset tiny --world 1 --steps 2 --rounds 1 --bf16 --accelerator "
      "cpu-detached --json");
  ASSERT_EQ(detached["rows"].size(), 4u);
  for (int stage = 0; stage < 4; ++stage) {
    EXPECT_EQ(cpu["rows"][stage]["host_waits"], 0) << "stage " << stage;
    EXPECT_EQ(detached["rows"][stage]["host_waits"], 2) << "stage " << stage;
  }
}

// The sizes given over the preset are the shape trained, and the step's FLOPs are 6N per token
// plus attention's 6 L C T.
TEST(BenchCli, StepTrainsTheSizesGiven) {
  const auto out = run_json(
      "step --model gpt --preset tiny --n-layer 1 --vocab 10 --world 1 --threads 2 --steps 1 "
      "--rounds 1 --micro-batch 2 --json");
  EXPECT_EQ(out["preset"], "tiny with sizes given (L1 H2 C32 T16 V10)");
  EXPECT_EQ(out["threads"], 2);
  // wte 10x32 + wpe 16x32, one block of 12 C^2 + 13 C, the final LayerNorm 2C.
  const double params = 10 * 32 + 16 * 32 + 12 * 32 * 32 + 13 * 32 + 2 * 32;
  EXPECT_EQ(out["params"].get<double>(), params);
  EXPECT_NEAR(out["step_gflop"].get<double>(), (6 * params + 6 * 32 * 16) * 2 * 16 / 1e9, 1e-15);
}

// Every (op, block, depth) point is a row, writes first, through the backend asked for, its GB/s
// the median of --repeats passes; the best of each direction is the largest of its rows; the aio
// settings are the point whose smaller share of its direction's best is largest; the scratch
// file is gone afterwards.
TEST(BenchCli, NvmeMeasuresEveryPassAndRemovesItsFile) {
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / ("zl_bench_nvme_" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  const auto out =
      run_json("nvme --path " + folder.string() +
               " --size 8M --blocks 1M,4M --depths 1,2 --repeats 3 --aio-backend threads --json");
  ASSERT_EQ(out["rows"].size(), 8u);
  EXPECT_EQ(out["backend"], "threads");
  EXPECT_EQ(out["size_bytes"], 8 << 20);
  EXPECT_EQ(out["repeats"], 3);
  EXPECT_EQ(out["pages"], "huge");
  double best_read = 0.0, best_write = 0.0;
  for (std::size_t i = 0; i < 8; ++i) {
    const auto& row = out["rows"][i];
    EXPECT_EQ(row["op"], i < 4 ? "write" : "read");
    EXPECT_EQ(row["block_bytes"], (i % 4 < 2 ? 1 : 4) << 20);
    EXPECT_EQ(row["queue_depth"], i % 2 == 0 ? 1 : 2);
    std::vector<double> passes = row["passes_gbps"].get<std::vector<double>>();
    ASSERT_EQ(passes.size(), 3u);
    std::ranges::sort(passes);
    EXPECT_EQ(row["gbps"].get<double>(), passes[1]) << "the median";
    EXPECT_GT(passes[0], 0.0);
    double& best = i < 4 ? best_write : best_read;
    best = std::max(best, row["gbps"].get<double>());
  }
  EXPECT_EQ(out["read_gbps"].get<double>(), best_read);
  EXPECT_EQ(out["write_gbps"].get<double>(), best_write);
  double best_share = 0.0;
  std::size_t aio_point = 0;
  for (std::size_t p = 0; p < 4; ++p) {
    const double share = std::min(out["rows"][p]["gbps"].get<double>() / best_write,
                                  out["rows"][p + 4]["gbps"].get<double>() / best_read);
    if (share > best_share) {
      best_share = share;
      aio_point = p;
    }
  }
  EXPECT_EQ(out["aio"]["block_size"], out["rows"][aio_point]["block_bytes"]);
  EXPECT_EQ(out["aio"]["queue_depth"], out["rows"][aio_point]["queue_depth"]);
  EXPECT_EQ(out["aio_write_gbps"], out["rows"][aio_point]["gbps"]);
  EXPECT_EQ(out["aio_read_gbps"], out["rows"][aio_point + 4]["gbps"]);
  EXPECT_TRUE(std::filesystem::is_empty(folder));
  const auto small = run_json("nvme --path " + folder.string() +
                              " --size 4M --blocks 1M --depths 1 --repeats 1 --pages small --json");
  EXPECT_EQ(small["pages"], "small");
  EXPECT_EQ(small["rows"].size(), 2u);
  std::filesystem::remove_all(folder);
}

TEST(BenchCli, BadFlagsExitTwoWithOneLine) {
  for (const char* args :
       {"collectives --worlds 8..2", "collectives --max-bytes 4X", "adam --params 0",
        "step --preset huge", "step --threads 0", "step --threads x", "nvme",
        "nvme --path /nonexistent-zerolab-folder", "nvme --path . --blocks 1000",
        "nvme --path . --depths 0", "nvme --path . --repeats 0", "nvme --path . --aio-backend aio",
        "nvme --path . --size 1M --blocks 4M", "nvme --path . --pages tiny", "frobnicate"}) {
    const CommandResult result =
        run_command(std::string(zl::test::zerolab_binary()) + " bench " + args);
    EXPECT_EQ(result.exit_code, 2) << args << ": " << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
}

}  // namespace
}  // namespace zl
