// swap_file.cpp — SwapFile with POSIX calls: open(O_CREAT | O_EXCL), O_DIRECT set where the file
// system takes it, posix_fallocate, then its IoQueue for the bytes, close and unlink.
#include "core/swap_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
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
  const auto mix = [](std::uint64_t h, std::uint64_t word) {
    h = (h ^ word) * kMultiplier;
    return h ^ (h >> 29);
  };
  // Four lanes over 32-byte strides, so the multiplies of one do not wait on another's: the hash
  // keeps up with memory, not with one multiply's latency.
  std::uint64_t lanes[4] = {hash, hash ^ 1, hash ^ 2, hash ^ 3};
  std::size_t i = 0;
  for (; i + 32 <= bytes.size(); i += 32) {
    for (int lane = 0; lane < 4; ++lane) {
      std::uint64_t word = 0;
      std::memcpy(&word, bytes.data() + i + 8 * lane, 8);
      lanes[lane] = mix(lanes[lane], word);
    }
  }
  for (const std::uint64_t lane : lanes) hash = mix(hash, lane);
  for (; i + 8 <= bytes.size(); i += 8) {
    std::uint64_t word = 0;
    std::memcpy(&word, bytes.data() + i, 8);
    hash = mix(hash, word);
  }
  for (; i < bytes.size(); ++i) hash = (hash ^ static_cast<std::uint8_t>(bytes[i])) * kMultiplier;
  return hash;
}

namespace {

// The first folder of this process that refuses O_DIRECT, said on stderr: its swap files go through
// the page cache, which keeps a copy of their bytes in memory, the opposite of what they are for.
void say_no_direct_io_once(const std::filesystem::path& folder) {
  static std::once_flag said;
  std::call_once(said, [&] {
    std::fputs(fmt::format("zerolab: {} refuses O_DIRECT (tmpfs?): its swap files go through the "
                           "page cache, which holds their bytes in memory too; pass a folder on "
                           "a disk\n",
                           folder.string())
                   .c_str(),
               stderr);
  });
}

}  // namespace

bool try_direct_io(int fd) {
  const int flags = ::fcntl(fd, F_GETFL);
  return flags >= 0 && ::fcntl(fd, F_SETFL, flags | O_DIRECT) == 0;
}

SwapFile::SwapFile(std::filesystem::path path, std::int64_t bytes, const AioSettings& aio,
                   std::string_view setting)
    : path_(std::move(path)), bytes_(bytes), setting_(setting) {
  ZL_CHECK(bytes >= 0, "swap file {}: a size of {} bytes is invalid", path_.string(), bytes);
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ZL_CHECK(fd_ >= 0, "cannot create the swap file {}: {}: pass a {} folder this run can write",
           path_.string(), std::strerror(errno), setting_);
  direct_ = try_direct_io(fd_);
  if (!direct_) say_no_direct_io_once(path_.parent_path());
  try {
    queue_ = std::make_unique<IoQueue>(fd_, aio);
  } catch (...) {
    ::close(fd_);
    ::unlink(path_.c_str());
    fd_ = -1;
    throw;
  }
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
  queue_.reset();
  ::close(fd_);
  ::unlink(path_.c_str());
}

void SwapFile::check_range(std::int64_t offset, std::size_t size) const {
  const std::int64_t end = offset + page_padded(static_cast<std::int64_t>(size));
  ZL_CHECK(offset >= 0 && offset % kPageBytes == 0 && end <= bytes_,
           "swap file {}: bytes [{}, {}) are not whole pages inside its {} bytes", path_.string(),
           offset, end, bytes_);
}

SwapIo SwapFile::start_write(std::int64_t offset, std::span<const std::byte> bytes) {
  check_range(offset, bytes.size());
  // The queue only reads a write's bytes.
  auto* data =
      const_cast<std::byte*>(bytes.data());  // NOLINT(cppcoreguidelines-pro-type-const-cast)
  return {queue_->submit(IoDirection::Write, offset, data, bytes.size()), IoDirection::Write};
}

SwapIo SwapFile::start_read(std::int64_t offset, std::span<std::byte> bytes) {
  check_range(offset, bytes.size());
  struct stat status {};
  ZL_CHECK(::fstat(fd_, &status) == 0 && status.st_nlink > 0,
           "the swap file {} was removed under this run: keep {} for this run alone and start it "
           "again",
           path_.string(), setting_);
  return {queue_->submit(IoDirection::Read, offset, bytes.data(), bytes.size()), IoDirection::Read};
}

IoTotals SwapFile::take_unrecorded() {
  const IoTotals now = queue_->totals();
  const IoTotals moved{.read_bytes = now.read_bytes - recorded_.read_bytes,
                       .written_bytes = now.written_bytes - recorded_.written_bytes,
                       .read_ms = now.read_ms - recorded_.read_ms,
                       .write_ms = now.write_ms - recorded_.write_ms};
  recorded_ = now;
  return moved;
}

void SwapFile::wait(const SwapIo& io) {
  const std::string error = queue_->wait(io.ticket);
  if (error.empty()) return;
  if (io.direction == IoDirection::Write) {
    fail("cannot write the swap file {}: {}: free space there or pass another {}", path_.string(),
         error, setting_);
  }
  fail(
      "cannot read the swap file {}: {}: it was changed under this run; keep {} for this run "
      "alone and start it again",
      path_.string(), error, setting_);
}

}  // namespace zl
