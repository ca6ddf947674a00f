// swap_file.cpp — SwapFile with POSIX calls: open(O_CREAT | O_EXCL), O_DIRECT set where the file
// system takes it, posix_fallocate, pwrite and pread in loops (they may move fewer bytes than
// asked; with O_DIRECT through the aligned staging block, a piece at a time), close and unlink.
#include "core/swap_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>

#include "core/error.hpp"

namespace zl {

std::filesystem::path unique_swap_path(const std::filesystem::path& folder) {
  static std::atomic<std::int64_t> made{0};
  return folder /
         ("zerolab-" + std::to_string(::getpid()) + "-" + std::to_string(made++) + ".swap");
}

std::uint64_t swap_checksum(std::span<const std::byte> bytes, std::uint64_t hash) {
  constexpr std::uint64_t kMultiplier = 0x9E3779B97F4A7C15ull;
  std::size_t i = 0;
  for (; i + 8 <= bytes.size(); i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, bytes.data() + i, 8);
    hash = (hash ^ word) * kMultiplier;
    hash ^= hash >> 29;
  }
  for (; i < bytes.size(); ++i) hash = (hash ^ static_cast<std::uint8_t>(bytes[i])) * kMultiplier;
  return hash;
}

bool try_direct_io(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_DIRECT) == 0;
}

SwapFile::SwapFile(std::filesystem::path path, std::int64_t bytes, std::string_view setting)
    : path_(std::move(path)), bytes_(bytes), setting_(setting) {
  ZL_CHECK(bytes >= 0, "swap file {}: a size of {} bytes is invalid", path_.string(), bytes);
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ZL_CHECK(fd_ >= 0, "cannot create the swap file {}: {}: pass a {} folder this run can write",
           path_.string(), std::strerror(errno), setting_);
  direct_ = try_direct_io(fd_);
  if (bytes == 0) return;
  // A disk without the room fails here, before anything is allocated: a file system may fill
  // itself while posix_fallocate tries (ext4 allocates until it runs out), for every other
  // writer on it until the file is removed.
  std::error_code ec;
  const std::filesystem::space_info space = std::filesystem::space(path_.parent_path(), ec);
  if (!ec && static_cast<std::uintmax_t>(bytes) > space.available) {
    ::close(fd_);
    ::unlink(path_.c_str());
    fd_ = -1;
    fail(
        "cannot reserve {} bytes for the swap file {}: {} bytes are free there: free space "
        "there or pass another {}",
        bytes, path_.string(), space.available, setting_);
  }
  if (const int error = ::posix_fallocate(fd_, 0, bytes); error != 0) {
    ::close(fd_);
    ::unlink(path_.c_str());
    fd_ = -1;
    fail("cannot reserve {} bytes for the swap file {}: {}: free space there or pass another {}",
         bytes, path_.string(), std::strerror(error), setting_);
  }
}

SwapFile::~SwapFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(path_.c_str());
}

void SwapFile::AlignedFree::operator()(std::byte* p) const {
  std::free(p);
}

void SwapFile::check_range(std::int64_t offset, std::size_t size) const {
  const std::int64_t end = offset + aligned(static_cast<std::int64_t>(size));
  ZL_CHECK(offset >= 0 && offset % kAlignBytes == 0 && end <= bytes_,
           "swap file {}: bytes [{}, {}) are not whole pages inside its {} bytes", path_.string(),
           offset, end, bytes_);
}

std::byte* SwapFile::staging() {
  if (!staging_) {
    auto* block = static_cast<std::byte*>(
        std::aligned_alloc(kAlignBytes, static_cast<std::size_t>(kStagingBytes)));
    ZL_CHECK(block != nullptr, "no memory for the swap file's {}-byte staging block",
             kStagingBytes);
    staging_.reset(block);
  }
  return staging_.get();
}

namespace {

// Calls `move(done)` (a pread or pwrite of the bytes not yet moved, at their offset) until
// `size` bytes have moved: either call may move fewer bytes than asked, or be interrupted. With
// `whole` (O_DIRECT, whose offsets must stay aligned) a call that moves fewer is the file's end.
// Anything else is `fail_with(reason)`.
template <class Move, class Fail>
void move_all(std::size_t size, bool whole, Move move, Fail fail_with) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t moved = move(done);
    if (moved < 0 && errno == EINTR) continue;
    if (moved < 0) fail_with(std::strerror(errno));
    if (moved == 0 || (whole && static_cast<std::size_t>(moved) < size - done)) fail_with(nullptr);
    done += static_cast<std::size_t>(moved);
  }
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

void SwapFile::write(std::int64_t offset, std::span<const std::byte> bytes) {
  check_range(offset, bytes.size());
  const auto started = std::chrono::steady_clock::now();
  const auto write_all = [&](const std::byte* data, std::size_t size, std::int64_t at) {
    move_all(
        size, direct_,
        [&](std::size_t done) {
          return ::pwrite(fd_, data + done, size - done,
                          static_cast<off_t>(at) + static_cast<off_t>(done));
        },
        [&](const char* reason) {
          fail("cannot write the swap file {}: {}: free space there or pass another {}",
               path_.string(), reason != nullptr ? reason : "no progress", setting_);
        });
  };
  if (!direct_) {
    write_all(bytes.data(), bytes.size(), offset);
  } else {
    // A piece at a time through the staging block, its last page padded with zeros.
    for (std::size_t first = 0; first < bytes.size();) {
      const auto piece = std::min(bytes.size() - first, static_cast<std::size_t>(kStagingBytes));
      const auto padded = static_cast<std::size_t>(aligned(static_cast<std::int64_t>(piece)));
      std::memcpy(staging(), bytes.data() + first, piece);
      std::memset(staging() + piece, 0, padded - piece);
      write_all(staging(), padded, offset + static_cast<std::int64_t>(first));
      first += piece;
    }
  }
  totals_.written_bytes += static_cast<std::int64_t>(bytes.size());
  totals_.write_ms += ms_since(started);
}

void SwapFile::read(std::int64_t offset, std::span<std::byte> bytes) {
  check_range(offset, bytes.size());
  struct stat status {};
  ZL_CHECK(::fstat(fd_, &status) == 0 && status.st_nlink > 0,
           "the swap file {} was removed under this run: keep {} for this run alone and start it "
           "again",
           path_.string(), setting_);
  const auto started = std::chrono::steady_clock::now();
  const auto read_all = [&](std::byte* data, std::size_t size, std::int64_t at) {
    move_all(
        size, direct_,
        [&](std::size_t done) {
          return ::pread(fd_, data + done, size - done,
                         static_cast<off_t>(at) + static_cast<off_t>(done));
        },
        [&](const char* reason) {
          fail(
              "cannot read the swap file {}: {}: it was changed under this run; keep {} for this "
              "run alone and start it again",
              path_.string(), reason != nullptr ? reason : "it ends early (cut short)", setting_);
        });
  };
  if (!direct_) {
    read_all(bytes.data(), bytes.size(), offset);
  } else {
    for (std::size_t first = 0; first < bytes.size();) {
      const auto piece = std::min(bytes.size() - first, static_cast<std::size_t>(kStagingBytes));
      const auto padded = static_cast<std::size_t>(aligned(static_cast<std::int64_t>(piece)));
      read_all(staging(), padded, offset + static_cast<std::int64_t>(first));
      std::memcpy(bytes.data() + first, staging(), piece);
      first += piece;
    }
  }
  totals_.read_bytes += static_cast<std::int64_t>(bytes.size());
  totals_.read_ms += ms_since(started);
}

}  // namespace zl
