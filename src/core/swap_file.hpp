// swap_file.hpp — a scratch file on disk that holds state swapped out of memory (ZeRO-Infinity's
// NVMe tier): its space is reserved when it is made, ranges are written and read back at their
// offsets, and it is removed when it ends. Scratch, never a checkpoint: nothing reads it after
// its run.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>

namespace zl {

/// A file of a fixed size in a folder, written and read by byte ranges (pwrite, pread). Every
/// failure is one zl::Error line naming the file and what to do.
class SwapFile {
 public:
  /// Creates `path` (its folder must exist; a file already there is an error: another run's) and
  /// reserves `bytes` bytes of disk for it, so a disk without the room fails here, before
  /// training, and not in the middle of a step.
  SwapFile(std::filesystem::path path, std::int64_t bytes);
  /// Closes and removes the file.
  ~SwapFile();
  SwapFile(const SwapFile&) = delete;
  SwapFile& operator=(const SwapFile&) = delete;

  /// Writes `bytes` at `offset` (the range must lie in the file).
  void write(std::int64_t offset, std::span<const std::byte> bytes);
  /// Reads `bytes.size()` bytes at `offset` into `bytes` (the range must lie in the file); a
  /// file cut short or removed under the run is an error, not zeros.
  void read(std::int64_t offset, std::span<std::byte> bytes) const;

  /// The file.
  const std::filesystem::path& path() const { return path_; }
  /// Its size in bytes.
  std::int64_t bytes() const { return bytes_; }

 private:
  // Throws unless [offset, offset + size) lies in the file.
  void check_range(std::int64_t offset, std::size_t size) const;

  std::filesystem::path path_;
  std::int64_t bytes_ = 0;
  int fd_ = -1;
};

}  // namespace zl
