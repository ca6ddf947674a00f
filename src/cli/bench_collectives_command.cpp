// bench_collectives_command.cpp — `zerolab bench collectives`: parses the sweep's flags, runs it
// (src/bench/collectives_bench.cpp) and prints nccl-tests' columns with the shared-memory ideal
// and busbw / ideal beside them, then the 4 KiB latency of each op per world.
#include "cli/bench_collectives_command.hpp"

#include <fmt/format.h>

#include <cstddef>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bench/collectives_bench.hpp"
#include "cli/bench_command.hpp"

namespace zl {

namespace {

using nlohmann::ordered_json;

struct CollectivesFlags {
  std::string worlds = "2..8";
  std::string min_bytes = "4K";
  std::string max_bytes = "256M";
  std::size_t size_factor = 4;
  bool full = false;
  double budget_ms = bench::CollectivesBenchOptions{}.budget_ms;
  bool json = false;
};

std::string human_bytes(std::size_t bytes) {
  if (bytes >= (std::size_t{1} << 30) && bytes % (std::size_t{1} << 30) == 0) {
    return fmt::format("{}G", bytes >> 30);
  }
  if (bytes >= (std::size_t{1} << 20) && bytes % (std::size_t{1} << 20) == 0) {
    return fmt::format("{}M", bytes >> 20);
  }
  if (bytes >= (std::size_t{1} << 10) && bytes % (std::size_t{1} << 10) == 0) {
    return fmt::format("{}K", bytes >> 10);
  }
  return fmt::format("{}", bytes);
}

ordered_json result_json(const bench::CollectivesBenchResult& result) {
  ordered_json rows = ordered_json::array();
  for (const auto& row : result.rows) {
    rows.push_back({{"op", row.op},
                    {"world", row.world},
                    {"bytes", row.bytes},
                    {"iters", row.iters},
                    {"ms", row.ms},
                    {"algbw_gbps", row.algbw_gbps},
                    {"busbw_gbps", row.busbw_gbps},
                    {"memcpy_gbps", row.memcpy_gbps},
                    {"ideal_busbw_gbps", row.ideal_busbw_gbps},
                    {"busbw_over_ideal", row.busbw_over_ideal}});
  }
  ordered_json latencies = ordered_json::array();
  for (const auto& latency : result.latencies) {
    latencies.push_back({{"op", latency.op},
                         {"world", latency.world},
                         {"bytes", latency.bytes},
                         {"iters", latency.iters},
                         {"us", latency.us}});
  }
  return {{"memcpy_gbps", result.memcpy_gbps},
          {"memcpy_bytes", result.memcpy_bytes},
          {"memcpy_threads", result.memcpy_threads},
          {"rows", rows},
          {"latencies", latencies}};
}

void print_rows(const bench::CollectivesBenchResult& result) {
  fmt::print(
      "sim collectives, fp32; memcpy {:.2f} GB/s ({} thread{}, {} bytes; each world's "
      "ideal uses its own)\n",
      result.memcpy_gbps, result.memcpy_threads, result.memcpy_threads == 1 ? "" : "s",
      human_bytes(result.memcpy_bytes));
  fmt::print(
      "algbw = bytes / time; busbw = algbw * 2(W-1)/W (all_reduce), * (W-1)/W (others);\n"
      "ideal = busbw reading every input and writing every output once at that memcpy's speed "
      "(collectives_bench.hpp)\n");
  fmt::print("{:<15} {:>5} {:>6} {:>6} {:>11} {:>11} {:>11} {:>11} {:>7}\n", "op", "world", "bytes",
             "iters", "time_us", "algbw_GB/s", "busbw_GB/s", "ideal_GB/s", "/ideal");
  for (const auto& row : result.rows) {
    fmt::print("{:<15} {:>5} {:>6} {:>6} {:>11.1f} {:>11.3f} {:>11.3f} {:>11.3f} {:>6.0f}%\n",
               row.op, row.world, human_bytes(row.bytes), row.iters, row.ms * 1e3, row.algbw_gbps,
               row.busbw_gbps, row.ideal_busbw_gbps, 100.0 * row.busbw_over_ideal);
  }
}

// One line per op: the median 4 KiB call in microseconds, one column per world.
void print_latencies(const bench::CollectivesBenchResult& result) {
  fmt::print("\nlatency of one {} call, us (median on rank 0)\n{:<15}",
             human_bytes(bench::kLatencyBytes), "op");
  std::vector<int> worlds;
  for (const auto& latency : result.latencies) {
    if (latency.op != result.latencies.front().op) break;
    worlds.push_back(latency.world);
    fmt::print(" {:>7}", fmt::format("W={}", latency.world));
  }
  for (std::size_t i = 0; i < result.latencies.size(); ++i) {
    if (i % worlds.size() == 0) fmt::print("\n{:<15}", result.latencies[i].op);
    fmt::print(" {:>7.1f}", result.latencies[i].us);
  }
  fmt::print("\n");
}

int run_collectives(const CollectivesFlags& flags) {
  bench::CollectivesBenchOptions options;
  options.worlds = parse_worlds(flags.worlds, "--worlds");
  options.min_bytes = parse_size_bytes(flags.min_bytes, "--min-bytes");
  options.max_bytes = parse_size_bytes(flags.max_bytes, "--max-bytes");
  options.size_factor = flags.size_factor;
  options.budget_ms = flags.budget_ms;
  const bench::CollectivesBenchResult result = bench::run_collectives_bench(options);
  if (flags.json) {
    fmt::print("{}\n", result_json(result).dump(2));
    return 0;
  }
  print_rows(result);
  print_latencies(result);
  return 0;
}

}  // namespace

CLI::App* add_bench_collectives(CLI::App& bench, std::function<int()>& run) {
  auto* cmd = bench.add_subcommand(
      "collectives",
      "Sim all_reduce, reduce_scatter, all_gather: time, algbw and busbw (nccl-tests' "
      "definitions) per world and size against the shared-memory ideal, and 4 KiB latency");
  auto flags = std::make_shared<CollectivesFlags>();
  cmd->add_option("--worlds", flags->worlds, "World sizes: 2..8, 2,4,8 or 4")
      ->capture_default_str();
  cmd->add_option("--min-bytes", flags->min_bytes, "Smallest size: 4K, 1M, ...")
      ->capture_default_str();
  cmd->add_option("--max-bytes", flags->max_bytes, "Largest size: 64M, 256M, ...")
      ->capture_default_str();
  auto* factor =
      cmd->add_option("--size-factor", flags->size_factor, "Each size is the last times this")
          ->check(CLI::Range(2, 1024))
          ->capture_default_str();
  cmd->add_flag("--full", flags->full,
                "Every size: 4K to 256M doubling, not quadrupling (about twice as long); flags "
                "given beside it still apply");
  cmd->add_option("--budget-ms", flags->budget_ms, "Time to spend timing each point")
      ->check(CLI::Range(1.0, 60000.0))
      ->capture_default_str();
  cmd->add_flag(
      "--json", flags->json,
      "Print {memcpy_gbps, memcpy_bytes, memcpy_threads, rows: [{op, world, bytes, "
      "iters, ms, algbw_gbps, busbw_gbps, memcpy_gbps, ideal_busbw_gbps, busbw_over_ideal}], "
      "latencies: [{op, world, bytes, iters, us}]}");
  cmd->callback([&run, flags, factor] {
    if (flags->full && factor->count() == 0) flags->size_factor = 2;
    parse_worlds(flags->worlds, "--worlds");
    parse_size_bytes(flags->min_bytes, "--min-bytes");
    parse_size_bytes(flags->max_bytes, "--max-bytes");
    run = [flags] { return run_collectives(*flags); };
  });
  return cmd;
}

}  // namespace zl
