// file_lock.cpp — flock(2) without waiting, checked against the file now at the path (a holder
// that ends removes its file: a lock on the removed one guards nothing).
#include "core/file_lock.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.hpp"

namespace zl {

namespace {

// True when `fd` is the file at `path` (not one removed, or replaced, since it was opened).
bool is_file_at(int fd, const std::filesystem::path& path) {
  struct stat held {};
  struct stat named {};
  return ::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 &&
         held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

}  // namespace

FileLock::FileLock(std::filesystem::path lock_file, std::string_view what, std::string_view instead,
                   LockFileFate fate)
    : path_(std::move(lock_file)), fate_(fate) {
  for (;;) {
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    ZL_CHECK(fd_ >= 0, "cannot lock {}: {}: {}: make its folder writable or {}", what,
             path_.string(), std::strerror(errno), instead);
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      ZL_CHECK(err != EWOULDBLOCK, "{} is in use by another run: wait for it to end or {}", what,
               instead);
      fail("cannot lock {}: {}: {}: check the file system", what, path_.string(),
           std::strerror(err));
    }
    if (is_file_at(fd_, path_)) return;
    ::close(fd_);  // the holder before us removed this file as we opened it: lock the new one
  }
}

FileLock::FileLock(FileLock&& other) noexcept
    : path_(std::move(other.path_)), fate_(other.fate_), fd_(std::exchange(other.fd_, -1)) {}

FileLock::~FileLock() {
  if (fd_ < 0) return;
  // Removed while still locked, so a run that opens it meanwhile finds the file gone and retries.
  if (fate_ == LockFileFate::Remove && is_file_at(fd_, path_)) ::unlink(path_.c_str());
  ::close(fd_);  // closing drops the flock
}

}  // namespace zl
