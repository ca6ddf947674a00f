// swap_file.hpp — a scratch file on disk that holds state swapped out of memory (ZeRO-Infinity's
// NVMe tier): its space is reserved when it is made, ranges are written and read back at their
// offsets, and it is removed when it ends. Scratch, never a checkpoint: nothing reads it after
// its run. Where the file system takes O_DIRECT the bytes bypass the page cache, as DeepSpeed's
// aio does, through an aligned staging block; elsewhere (tmpfs) they go through the cache.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>

namespace zl {

/// Sets O_DIRECT on the open file `fd` where its file system takes it (tmpfs on older kernels
/// refuses it); true when it did, false when the file goes through the page cache.
bool try_direct_io(int fd);

/// "<folder>/zerolab-<pid>-<n>.swap", n counting the swap files this process has named: a path no
/// other swap file of this process or of another live one has.
std::filesystem::path unique_swap_path(const std::filesystem::path& folder);

/// A 64-bit checksum of `bytes` continuing from `hash` (a multiply-xorshift over 8-byte words,
/// then the tail): what a swap file's owner keeps of each range it wrote, so that a file changed
/// under the run reads back as an error.
std::uint64_t swap_checksum(std::span<const std::byte> bytes, std::uint64_t hash);

/// Bytes a swap file has moved and the time its calls took, per direction.
struct SwapTotals {
  std::int64_t read_bytes = 0;     ///< bytes read back
  std::int64_t written_bytes = 0;  ///< bytes written
  double read_ms = 0.0;            ///< wall time of the reads' system calls and copies
  double write_ms = 0.0;           ///< wall time of the writes' system calls and copies
};

/// A file of a fixed size in a folder, written and read by byte ranges (pwrite, pread) that start
/// at multiples of kAlignBytes. Every failure is one zl::Error line naming the file and what to do.
class SwapFile {
 public:
  /// Where ranges start, and the unit O_DIRECT moves: a range's last page is padded to it.
  static constexpr std::int64_t kAlignBytes = 4096;
  /// The staging block of O_DIRECT: bytes move in pieces of at most this many.
  static constexpr std::int64_t kStagingBytes = 8 << 20;
  /// `bytes` rounded up to a multiple of kAlignBytes: what a range of `bytes` takes in the file.
  static std::int64_t aligned(std::int64_t bytes) {
    return (bytes + kAlignBytes - 1) / kAlignBytes * kAlignBytes;
  }

  /// Creates `path` (its folder must exist; a file already there is an error: another run's) and
  /// reserves `bytes` bytes of disk for it, so a disk without the room fails here, before
  /// training, and not in the middle of a step. Errors name `setting`, the flag that chose the
  /// folder.
  SwapFile(std::filesystem::path path, std::int64_t bytes,
           std::string_view setting = "--nvme-path");
  /// Closes and removes the file.
  ~SwapFile();
  SwapFile(const SwapFile&) = delete;
  SwapFile& operator=(const SwapFile&) = delete;

  /// Writes `bytes` at `offset`, a multiple of kAlignBytes; the range, its last page padded, must
  /// lie in the file.
  void write(std::int64_t offset, std::span<const std::byte> bytes);
  /// Reads `bytes.size()` bytes at `offset` into `bytes`, as write() takes them; a file cut short
  /// or removed under the run is an error, not zeros.
  void read(std::int64_t offset, std::span<std::byte> bytes);

  /// The file.
  const std::filesystem::path& path() const { return path_; }
  /// Its size in bytes.
  std::int64_t bytes() const { return bytes_; }
  /// True when its bytes bypass the page cache (O_DIRECT).
  bool direct() const { return direct_; }
  /// What it has moved so far.
  const SwapTotals& totals() const { return totals_; }

 private:
  // Throws unless [offset, offset + size) lies in the file.
  void check_range(std::int64_t offset, std::size_t size) const;
  // The staging block, made at the first O_DIRECT call.
  std::byte* staging();

  struct AlignedFree {
    void operator()(std::byte* p) const;
  };

  std::filesystem::path path_;
  std::int64_t bytes_ = 0;
  std::string setting_;  // the flag that chose the folder, for the errors
  int fd_ = -1;
  bool direct_ = false;
  std::unique_ptr<std::byte, AlignedFree> staging_;
  SwapTotals totals_;
};

}  // namespace zl
