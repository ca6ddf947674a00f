// nvme_bench.cpp — one scratch file, written and read in passes of each block size and depth.
#include "bench/nvme_bench.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "bench/timing.hpp"
#include "core/error.hpp"
#include "core/swap_file.hpp"

namespace zl::bench {

namespace {

// The scratch file: made new (never another's), removed when it ends.
class ScratchFile {
 public:
  explicit ScratchFile(const std::filesystem::path& folder)
      : path_(folder / ("zerolab-bench-nvme-" + std::to_string(::getpid()) + ".tmp")) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd_ < 0) {
      fail("bench nvme: cannot make {}: {}: give --path a writable folder", path_.string(),
           std::strerror(errno));
    }
    direct_ = try_direct_io(fd_);  // as the swap files do
  }
  ~ScratchFile() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  int fd() const { return fd_; }
  bool direct() const { return direct_; }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  bool direct_ = false;
};

// `depth` blocks of `bytes` for a pass in one allocation (small blocks share huge pages, as the
// swap files' staging blocks do, unless `huge_pages` is false), not zeros (which a disk may elide).
PageAlignedBytes pass_blocks(std::int64_t bytes, int depth, bool huge_pages) {
  PageAlignedBytes blocks = page_aligned_bytes(bytes * depth, "--blocks", huge_pages);
  std::memset(blocks.get(), 0x5a, static_cast<std::size_t>(bytes * depth));
  return blocks;
}

// One pass through `queue` (depth blocks in flight): the file's blocks in order, each a request
// of its own from one of `depth` buffers, the oldest waited for before its buffer is used again;
// a write pass ends when its data is on the disk (fdatasync). Returns the pass's GB/s.
double run_pass(const ScratchFile& file, IoQueue& queue, bool write, std::int64_t file_bytes,
                std::int64_t block_bytes, int depth, bool huge_pages) {
  const std::int64_t blocks = file_bytes / block_bytes;
  const PageAlignedBytes buffers = pass_blocks(block_bytes, depth, huge_pages);
  std::vector<IoTicket> tickets(static_cast<std::size_t>(depth), 0);
  std::string error;
  const auto settle = [&](IoTicket& ticket) {
    if (ticket == 0) return;
    const std::string why = queue.wait(ticket);
    if (error.empty()) error = why;
    ticket = 0;
  };
  const IoDirection direction = write ? IoDirection::Write : IoDirection::Read;
  const double start_ms = steady_ms();
  for (std::int64_t i = 0; i < blocks && error.empty(); ++i) {
    const auto slot = static_cast<std::size_t>(i % depth);
    settle(tickets[slot]);
    tickets[slot] = queue.submit(direction, i * block_bytes,
                                 buffers.get() + slot * static_cast<std::size_t>(block_bytes),
                                 static_cast<std::size_t>(block_bytes));
  }
  for (IoTicket& ticket : tickets) settle(ticket);
  if (write && error.empty() && ::fdatasync(file.fd()) != 0) error = std::strerror(errno);
  const double ms = steady_ms() - start_ms;
  if (!error.empty()) {
    fail("bench nvme: {} of {} failed: {}: check the disk and its free space",
         write ? "writing" : "reading", file.path().string(), error);
  }
  return gbps(static_cast<double>(blocks * block_bytes), ms);
}

}  // namespace

void check_nvme_options(const NvmeBenchOptions& options) {
  std::error_code error;
  ZL_CHECK(std::filesystem::is_directory(options.folder, error),
           "bench nvme: {} is not a folder: give --path an existing, writable folder",
           options.folder.string());
  ZL_CHECK(!options.block_bytes.empty() && !options.queue_depths.empty(),
           "bench nvme: give at least one block size and one queue depth");
  for (const std::int64_t block : options.block_bytes) {
    ZL_CHECK(block >= kPageBytes && block % kPageBytes == 0,
             "bench nvme: block size {} is not a multiple of {}: O_DIRECT needs whole pages", block,
             kPageBytes);
    ZL_CHECK(block <= options.file_bytes,
             "bench nvme: block size {} is larger than --size {}: pass a larger --size", block,
             options.file_bytes);
  }
  ZL_CHECK(options.file_bytes % kPageBytes == 0,
           "bench nvme: --size {} is not a multiple of {}: O_DIRECT needs whole pages",
           options.file_bytes, kPageBytes);
  for (const int depth : options.queue_depths) {
    ZL_CHECK(depth >= 1 && depth <= 256, "bench nvme: queue depth {} is outside 1..256", depth);
  }
  ZL_CHECK(options.repeats >= 1 && options.repeats <= 100,
           "bench nvme: --repeats {} is outside 1..100", options.repeats);
}

NvmeBenchResult run_nvme_bench(const NvmeBenchOptions& options) {
  check_nvme_options(options);
  ScratchFile file(options.folder);
  const int reserved = ::posix_fallocate(file.fd(), 0, options.file_bytes);
  ZL_CHECK(reserved == 0 || reserved == EOPNOTSUPP,
           "bench nvme: {} has no room for {} bytes ({}): free space or pass a smaller --size",
           options.folder.string(), options.file_bytes, std::strerror(reserved));
  NvmeBenchResult result;
  result.folder = options.folder.string();
  result.direct = file.direct();
  result.file_bytes = options.file_bytes;
  for (int sweep = 0; sweep < options.repeats; ++sweep) {
    std::size_t row = 0;
    for (const bool write : {true, false}) {
      for (const std::int64_t block : options.block_bytes) {
        for (const int depth : options.queue_depths) {
          IoQueue queue(file.fd(), {.block_bytes = block,
                                    .queue_depth = depth,
                                    .thread_count = 1,
                                    .backend = options.backend});
          result.backend = queue.backend();
          if (sweep == 0) result.rows.push_back({write ? "write" : "read", block, depth, 0.0, {}});
          result.rows[row++].passes_gbps.push_back(
              run_pass(file, queue, write, options.file_bytes, block, depth, options.huge_pages));
        }
      }
    }
  }
  for (NvmeRow& row : result.rows) {
    row.gbps = median(row.passes_gbps);
    NvmeRow& best = row.op == "write" ? result.best_write : result.best_read;
    if (row.gbps > best.gbps) best = row;
  }
  // Writes and reads of a point sit half the rows apart.
  const std::size_t points = result.rows.size() / 2;
  double best_share = -1.0;
  for (std::size_t p = 0; p < points; ++p) {
    const NvmeRow& write = result.rows[p];
    const NvmeRow& read = result.rows[points + p];
    const double share =
        std::min(write.gbps / result.best_write.gbps, read.gbps / result.best_read.gbps);
    if (share <= best_share) continue;
    best_share = share;
    result.aio_write = write;
    result.aio_read = read;
  }
  return result;
}

}  // namespace zl::bench
