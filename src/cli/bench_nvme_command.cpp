// bench_nvme_command.cpp — `zerolab bench nvme --path DIR`: the flags of bench/nvme_bench.hpp's
// run, and its table or JSON, with the aio settings that serve both directions.
#include <fmt/format.h>

#include <charconv>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "bench/nvme_bench.hpp"
#include "cli/bench_command.hpp"
#include "core/error.hpp"

namespace zl {

namespace {

using nlohmann::ordered_json;

struct NvmeFlags {
  std::string path;
  std::string size = "256M";
  std::string blocks = "128K,1M,8M";
  std::string depths = "1,4,16";
  bool json = false;
  bench::NvmeBenchOptions options;
};

// The comma-separated items of `text`, each parsed by `parse`.
template <class T, class Parse>
std::vector<T> parse_list(const std::string& text, Parse parse) {
  std::vector<T> items;
  std::size_t begin = 0;
  while (true) {
    const std::size_t comma = text.find(',', begin);
    items.push_back(parse(text.substr(begin, comma - begin)));
    if (comma == std::string::npos) return items;
    begin = comma + 1;
  }
}

int parse_depth(const std::string& text) {
  int depth = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), depth);
  ZL_CHECK(!text.empty() && error == std::errc() && end == text.data() + text.size() && depth >= 1,
           "--depths '{}' is invalid: give I/Os in flight like 1,4,16", text);
  return depth;
}

int run_nvme(const NvmeFlags& flags) {
  const bench::NvmeBenchResult result = bench::run_nvme_bench(flags.options);
  // The aio settings to use: one point for both directions, as one aio section serves both.
  const bench::NvmeRow& aio = result.aio_read;
  const double read_share = result.aio_read.gbps / result.best_read.gbps;
  const double write_share = result.aio_write.gbps / result.best_write.gbps;
  if (flags.json) {
    ordered_json rows = ordered_json::array();
    for (const auto& row : result.rows) {
      rows.push_back({{"op", row.op},
                      {"block_bytes", row.block_bytes},
                      {"queue_depth", row.queue_depth},
                      {"gbps", row.gbps},
                      {"passes_gbps", row.passes_gbps}});
    }
    const ordered_json out = {
        {"folder", result.folder},
        {"o_direct", result.direct},
        {"backend", io_backend_name(result.backend)},
        {"size_bytes", result.file_bytes},
        {"pages", flags.options.huge_pages ? "huge" : "small"},
        {"rows", rows},
        {"repeats", flags.options.repeats},
        {"read_gbps", result.best_read.gbps},
        {"write_gbps", result.best_write.gbps},
        {"aio",
         {{"block_size", aio.block_bytes}, {"queue_depth", aio.queue_depth}, {"thread_count", 1}}},
        {"aio_read_gbps", result.aio_read.gbps},
        {"aio_write_gbps", result.aio_write.gbps}};
    fmt::print("{}\n", out.dump(2));
    return 0;
  }
  fmt::print(
      "bench nvme: {}, {} bytes a pass by {} from blocks on {} pages, each point the median of {} "
      "passes, {}\n",
      result.folder, result.file_bytes, io_backend_name(result.backend),
      flags.options.huge_pages ? "huge (2 MiB)" : "small (4 KiB)", flags.options.repeats,
      result.direct ? "O_DIRECT (the page cache bypassed)"
                    : "through the page cache (the file system refused O_DIRECT): reads "
                      "may come from memory, not the disk");
  fmt::print("{:<6} {:>12} {:>6} {:>8}\n", "op", "block_bytes", "depth", "GB/s");
  for (const auto& row : result.rows) {
    fmt::print("{:<6} {:>12} {:>6} {:>8.3f}\n", row.op, row.block_bytes, row.queue_depth, row.gbps);
  }
  fmt::print(
      "best write {:.3f} GB/s (block {}, depth {}); best read {:.3f} GB/s (block {}, depth "
      "{})\n",
      result.best_write.gbps, result.best_write.block_bytes, result.best_write.queue_depth,
      result.best_read.gbps, result.best_read.block_bytes, result.best_read.queue_depth);
  fmt::print(
      "aio for both directions (reads {:.3f} GB/s, {:.2f} of the best; writes {:.3f} GB/s, {:.2f} "
      "of the best): {{\"block_size\": {}, \"queue_depth\": {}, \"thread_count\": 1}}\n",
      result.aio_read.gbps, read_share, result.aio_write.gbps, write_share, aio.block_bytes,
      aio.queue_depth);
  return 0;
}

}  // namespace

CLI::App* add_bench_nvme(CLI::App& bench, std::function<int()>& run) {
  auto* cmd = bench.add_subcommand(
      "nvme",
      "A folder's sequential write and read bandwidth for ZeRO-Infinity's swap files, per block "
      "size and I/Os in flight, with O_DIRECT where it is taken, and the aio settings to use");
  auto flags = std::make_shared<NvmeFlags>();
  cmd->add_option("--path", flags->path, "The folder to measure (a scratch file is made there)")
      ->required();
  cmd->add_option("--size", flags->size, "Bytes written and read in each pass: 64M, 1G, ...")
      ->capture_default_str();
  cmd->add_option("--blocks", flags->blocks, "Block sizes, a list: 128K,1M,8M")
      ->capture_default_str();
  cmd->add_option("--depths", flags->depths, "I/Os in flight, a list: 1,4,16")
      ->capture_default_str();
  cmd->add_option("--repeats", flags->options.repeats,
                  "Sweeps of every pass; each point's GB/s is the median of its passes")
      ->capture_default_str();
  cmd->add_option_function<std::string>(
         "--aio-backend",
         [flags](const std::string& name) {
           flags->options.backend = parse_io_backend(name, "--aio-backend");
         },
         "io_uring | threads | auto: how the blocks reach the disk, as the swap files' "
         "--aio-backend")
      ->default_str("auto");
  cmd->add_option_function<std::string>(
         "--pages",
         [flags](const std::string& pages) {
           ZL_CHECK(pages == "huge" || pages == "small",
                    "--pages '{}' is not known: use huge or small", pages);
           flags->options.huge_pages = pages == "huge";
         },
         "huge | small: the blocks' memory on 2 MiB pages, as the swap files' host copies are, or "
         "on 4 KiB pages, to see what huge pages give on this machine")
      ->default_str("huge");
  cmd->add_flag("--json", flags->json,
                "Print {folder, o_direct, backend, size_bytes, pages, rows: [{op, block_bytes, "
                "queue_depth, gbps, passes_gbps}], repeats, read_gbps, write_gbps, aio: "
                "{block_size, queue_depth, thread_count}, aio_read_gbps, aio_write_gbps}");
  cmd->callback([&run, flags] {
    bench::NvmeBenchOptions& options = flags->options;
    options.folder = flags->path;
    options.file_bytes = static_cast<std::int64_t>(parse_size_bytes(flags->size, "--size"));
    options.block_bytes = parse_list<std::int64_t>(flags->blocks, [](const std::string& item) {
      return static_cast<std::int64_t>(parse_size_bytes(item, "--blocks"));
    });
    options.queue_depths = parse_list<int>(flags->depths, parse_depth);
    bench::check_nvme_options(options);  // a bad folder or size exits 2 here
    run = [flags] { return run_nvme(*flags); };
  });
  return cmd;
}

}  // namespace zl
