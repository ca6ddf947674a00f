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

void SwapFile::write(std::int64_t offset, std::span<const std::byte> bytes) {
  check_range(offset, bytes.size());
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t wrote = ::pwrite(fd_, bytes.data() + done, bytes.size() - done,
                                   static_cast<off_t>(offset) + static_cast<off_t>(done));
    if (wrote < 0 && errno == EINTR) continue;
    ZL_CHECK(wrote > 0,
             "cannot write the swap file {}: {}: free space there or pass another "
             "--nvme-path",
             path_.string(), wrote < 0 ? std::strerror(errno) : "no progress");
    done += static_cast<std::size_t>(wrote);
  }
}

void SwapFile::read(std::int64_t offset, std::span<std::byte> bytes) const {
  check_range(offset, bytes.size());
  struct stat status {};
  ZL_CHECK(::fstat(fd_, &status) == 0 && status.st_nlink > 0,
           "the swap file {} was removed under this run: keep --nvme-path for this run alone and "
           "start it again",
           path_.string());
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t got = ::pread(fd_, bytes.data() + done, bytes.size() - done,
                                static_cast<off_t>(offset) + static_cast<off_t>(done));
    if (got < 0 && errno == EINTR) continue;
    ZL_CHECK(got > 0,
             "cannot read the swap file {}: {}: it was changed under this run; keep "
             "--nvme-path for this run alone and start it again",
             path_.string(), got < 0 ? std::strerror(errno) : "it ends early (cut short)");
    done += static_cast<std::size_t>(got);
  }
}

}  // namespace zl
