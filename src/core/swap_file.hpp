// swap_file.hpp — a scratch file on disk that holds state swapped out of memory (ZeRO-Infinity's
// NVMe tier): its space is reserved when it is made, ranges are written and read back at their
// offsets, and it is removed when it ends. Scratch, never a checkpoint: nothing reads it after
// its run. Its bytes move through an IoQueue (io_uring or a thread pool, blocks in flight as the
// aio settings say), asynchronously where the caller wants; where the file system takes O_DIRECT
// they bypass the page cache, as DeepSpeed's aio does; elsewhere (tmpfs) they go through it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "core/io_queue.hpp"

namespace zl {

/// Sets O_DIRECT on the open file `fd` where its file system takes it (tmpfs on older kernels
/// refuses it); true when it did, false when the file goes through the page cache.
bool try_direct_io(int fd);

/// "<folder>/zerolab-<pid>-<n>.swap", n counting the swap files this process has named: a path no
/// other swap file of this process or of another live one has.
std::filesystem::path unique_swap_path(const std::filesystem::path& folder);

/// A 64-bit checksum of `bytes` continuing from `hash` (multiply-xorshift in four lanes over
/// 32-byte strides, then the remaining words and bytes): what a swap file's owner keeps of each
/// range it wrote, so that a file changed under the run reads back as an error.
std::uint64_t swap_checksum(std::span<const std::byte> bytes, std::uint64_t hash);

/// A request a SwapFile started: what wait() takes.
struct SwapIo {
  IoTicket ticket = 0;                        ///< the queue's handle
  IoDirection direction = IoDirection::Read;  ///< which way it moves bytes
};

/// A file of a fixed size in a folder, written and read by byte ranges that start on pages (a
/// range of `bytes` takes page_padded(bytes) of the file). Every failure is one zl::Error line
/// naming the file and what to do.
class SwapFile {
 public:
  /// Creates `path` (its folder must exist; a file already there is an error: another run's) and
  /// reserves `bytes` bytes of disk for it, so a disk without the room fails here, before
  /// training, and not in the middle of a step. Its bytes move as `aio` says. Errors name
  /// `setting`, the flag that chose the folder.
  SwapFile(std::filesystem::path path, std::int64_t bytes, const AioSettings& aio = {},
           std::string_view setting = "--nvme-path");
  /// Waits for what is in flight, closes and removes the file.
  ~SwapFile();
  SwapFile(const SwapFile&) = delete;
  SwapFile& operator=(const SwapFile&) = delete;

  /// Starts writing `bytes` at `offset`, a multiple of kPageBytes; the range, its last page
  /// padded, must lie in the file, and `bytes` must stay as they are until wait() returns.
  SwapIo start_write(std::int64_t offset, std::span<const std::byte> bytes);
  /// Starts reading `bytes.size()` bytes at `offset` into `bytes`, as start_write() takes them;
  /// `bytes` are the file's once wait() returns. A file removed under the run is an error here.
  SwapIo start_read(std::int64_t offset, std::span<std::byte> bytes);
  /// Waits until `io` has moved its bytes; a failed write (a full disk) or read (a file cut short
  /// under the run) is a zl::Error naming the file and what to do.
  void wait(const SwapIo& io);
  /// start_write(), then wait().
  void write(std::int64_t offset, std::span<const std::byte> bytes) {
    wait(start_write(offset, bytes));
  }
  /// start_read(), then wait().
  void read(std::int64_t offset, std::span<std::byte> bytes) { wait(start_read(offset, bytes)); }

  /// The file.
  const std::filesystem::path& path() const { return path_; }
  /// Its size in bytes.
  std::int64_t bytes() const { return bytes_; }
  /// True when its bytes bypass the page cache (O_DIRECT).
  bool direct() const { return direct_; }
  /// What it has moved so far, and how long its reads and writes were in flight.
  IoTotals totals() const { return queue_->totals(); }
  /// What it has moved since the last call (the first: since it was made), to record once
  /// nothing is in flight.
  IoTotals take_unrecorded();
  /// How its blocks reach the disk (io_uring or threads).
  IoBackend backend() const { return queue_->backend(); }

 private:
  // Throws unless [offset, offset + size) lies in the file.
  void check_range(std::int64_t offset, std::size_t size) const;
  std::filesystem::path path_;
  std::int64_t bytes_ = 0;
  std::string setting_;  // the flag that chose the folder, for the errors
  int fd_ = -1;
  bool direct_ = false;
  std::unique_ptr<IoQueue> queue_;  // made once the file is; ends before it closes
  IoTotals recorded_;               // what take_unrecorded() has given so far
};

}  // namespace zl
