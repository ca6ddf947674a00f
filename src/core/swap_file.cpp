// swap_file.cpp — SwapFile with POSIX calls: open(O_CREAT | O_EXCL), posix_fallocate, pwrite and
// pread in loops (they may move fewer bytes than asked), close and unlink.
#include "core/swap_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.hpp"

namespace zl {

SwapFile::SwapFile(std::filesystem::path path, std::int64_t bytes)
    : path_(std::move(path)), bytes_(bytes) {
  ZL_CHECK(bytes >= 0, "swap file {}: a size of {} bytes is invalid", path_.string(), bytes);
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  ZL_CHECK(fd_ >= 0,
           "cannot create the swap file {}: {}: pass an --nvme-path folder this run can "
           "write",
           path_.string(), std::strerror(errno));
  if (bytes == 0) return;
  if (const int error = ::posix_fallocate(fd_, 0, bytes); error != 0) {
    ::close(fd_);
    ::unlink(path_.c_str());
    fd_ = -1;
    fail(
        "cannot reserve {} bytes for the swap file {}: {}: free space there or pass another "
        "--nvme-path",
        bytes, path_.string(), std::strerror(error));
  }
}

SwapFile::~SwapFile() {
  if (fd_ < 0) return;
  ::close(fd_);
  ::unlink(path_.c_str());
}

void SwapFile::check_range(std::int64_t offset, std::size_t size) const {
  ZL_CHECK(offset >= 0 && offset + static_cast<std::int64_t>(size) <= bytes_,
           "swap file {}: bytes [{}, {}) lie outside its {} bytes", path_.string(), offset,
           offset + static_cast<std::int64_t>(size), bytes_);
}

namespace {

// Calls `move(done)` (a pread or pwrite of the bytes not yet moved, at their offset) until
// `size` bytes have moved: either call may move fewer bytes than asked, or be interrupted.
// Anything else is `fail_with(reason)`.
template <class Move, class Fail>
void move_all(std::size_t size, Move move, Fail fail_with) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t moved = move(done);
    if (moved < 0 && errno == EINTR) continue;
    if (moved <= 0) fail_with(moved < 0 ? std::strerror(errno) : nullptr);
    done += static_cast<std::size_t>(moved);
  }
}

}  // namespace

void SwapFile::write(std::int64_t offset, std::span<const std::byte> bytes) {
  check_range(offset, bytes.size());
  move_all(
      bytes.size(),
      [&](std::size_t done) {
        return ::pwrite(fd_, bytes.data() + done, bytes.size() - done,
                        static_cast<off_t>(offset) + static_cast<off_t>(done));
      },
      [&](const char* reason) {
        fail("cannot write the swap file {}: {}: free space there or pass another --nvme-path",
             path_.string(), reason != nullptr ? reason : "no progress");
      });
}

void SwapFile::read(std::int64_t offset, std::span<std::byte> bytes) const {
  check_range(offset, bytes.size());
  struct stat status {};
  ZL_CHECK(::fstat(fd_, &status) == 0 && status.st_nlink > 0,
           "the swap file {} was removed under this run: keep --nvme-path for this run alone and "
           "start it again",
           path_.string());
  move_all(
      bytes.size(),
      [&](std::size_t done) {
        return ::pread(fd_, bytes.data() + done, bytes.size() - done,
                       static_cast<off_t>(offset) + static_cast<off_t>(done));
      },
      [&](const char* reason) {
        fail(
            "cannot read the swap file {}: {}: it was changed under this run; keep --nvme-path "
            "for this run alone and start it again",
            path_.string(), reason != nullptr ? reason : "it ends early (cut short)");
      });
}

}  // namespace zl
