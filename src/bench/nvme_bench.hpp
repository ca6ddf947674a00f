// nvme_bench.hpp — `zerolab bench nvme`: a folder's sequential write and read bandwidth, the way
// DeepSpeed's ds_io / ds_nvme_tune measure a disk for ZeRO-Infinity's swap files: one scratch
// file, written and then read whole in blocks of each size with each number of I/Os in flight,
// through the swap files' own IoQueue (io_uring or the thread pool) with O_DIRECT where the
// folder's file system takes it (the page cache bypassed, as DeepSpeed's aio does), else through
// the page cache, which the result says. The sweep runs `repeats` times, each point's figure the
// median of its passes, so a shared disk's swings reach every point alike and one lucky pass does
// not make a best. The aio settings to use serve both directions, as DeepSpeed's one aio section
// does: the (block size, depth) whose read and write come closest to each direction's best.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/io_queue.hpp"

namespace zl::bench {

/// What to measure.
struct NvmeBenchOptions {
  std::filesystem::path folder;           ///< where the scratch file is made (and removed)
  std::int64_t file_bytes = 256ll << 20;  ///< bytes written and read in each pass
  std::vector<std::int64_t> block_bytes = {128ll << 10, 1ll << 20, 8ll << 20};  ///< I/O sizes
  std::vector<int> queue_depths = {1, 4, 16};                                   ///< I/Os in flight
  int repeats = 3;                      ///< sweeps; each point's figure is the median of its passes
  IoBackend backend = IoBackend::Auto;  ///< how the blocks reach the disk
  /// The blocks' memory on huge pages, as the swap files' host copies are (core/huge_pages.hpp);
  /// false: on 4 KiB pages, to see what huge pages give on this machine.
  bool huge_pages = true;
};

/// One pass: `file_bytes` moved in blocks of `block_bytes`, `queue_depth` at a time.
struct NvmeRow {
  std::string op;  ///< "write" or "read"
  std::int64_t block_bytes = 0;  ///< bytes of each pwrite or pread
  int queue_depth = 0;           ///< blocks in flight
  double gbps = 0.0;             ///< decimal GB/s, the median of `passes_gbps`
  std::vector<double> passes_gbps;  ///< each sweep's pass, in order
};

/// Every pass, and the best of each direction.
struct NvmeBenchResult {
  std::string folder;           ///< the folder measured
  bool direct = false;          ///< O_DIRECT was taken (false: through the page cache)
  IoBackend backend = IoBackend::Threads;  ///< the backend that moved the blocks
  std::int64_t file_bytes = 0;  ///< bytes per pass
  std::vector<NvmeRow> rows;    ///< writes, then reads, in the options' order
  NvmeRow best_write;           ///< the fastest write point
  NvmeRow best_read;            ///< the fastest read point
  /// The aio settings for both directions: the point whose smaller share of its direction's best
  /// (read / best read, write / best write) is largest; its read and write rows.
  NvmeRow aio_read;
  NvmeRow aio_write;  ///< see aio_read
};

/// Throws zl::Error in one line for options run_nvme_bench refuses before it touches the disk: a
/// folder that is missing, a block size or --size that is not a multiple of 4096, a block larger
/// than the file, a depth outside 1..256, repeats outside 1..100.
void check_nvme_options(const NvmeBenchOptions& options);

/// Runs every (block size, depth) pass, writes before reads, `repeats` times over, on one scratch
/// file in options.folder, and removes it. Throws zl::Error in one line naming the folder for a
/// folder that is missing or not writable, a disk without file_bytes free, or a size that is not a
/// multiple of 4096.
NvmeBenchResult run_nvme_bench(const NvmeBenchOptions& options);

}  // namespace zl::bench
