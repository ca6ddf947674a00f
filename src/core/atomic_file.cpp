// atomic_file.cpp — temporary file, fsync, rename, fsync of the directory; and the up-front
// check that a path can take a new file.
#include "core/atomic_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/error.hpp"

namespace zl {

namespace {

// What the user can do about a failed system call, by errno.
std::string_view advice(int err) {
  switch (err) {
    case ENOENT:
    case ENOTDIR:
      return "create the directory or choose another path";
    case EACCES:
    case EPERM:
    case EROFS:
      return "make the directory writable or choose another path";
    case ENOSPC:
    case EDQUOT:
      return "free some disk space or choose another path";
    case EISDIR:
      return "remove that directory or choose another path";
    default:
      return "check the path and the file system";
  }
}

// Closes a file descriptor on every path out of a scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() { close(); }
  int get() const { return fd_; }
  /// Closes now; returns what close(2) returned.
  int close() { return fd_ < 0 ? 0 : ::close(std::exchange(fd_, -1)); }

 private:
  int fd_;
};

// Writes all `size` bytes, retrying partial writes; false with errno set on failure.
bool write_all(int fd, const void* data, std::size_t size) {
  const auto* cursor = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t written = ::write(fd, cursor, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    cursor += written;
    size -= static_cast<std::size_t>(written);
  }
  return true;
}

[[noreturn]] void fail_write(const std::string& shown, int err, std::string_view step) {
  fail("cannot write {}: {}{}: {}", shown, std::strerror(err), step, advice(err));
}

std::filesystem::path directory_of(const std::filesystem::path& path) {
  return path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");
}

// What a file that is not a regular one is, in words ("a character device").
std::string_view kind_of(std::filesystem::file_type type) {
  switch (type) {
    case std::filesystem::file_type::directory:
      return "a directory";
    case std::filesystem::file_type::character:
      return "a character device";
    case std::filesystem::file_type::block:
      return "a block device";
    case std::filesystem::file_type::fifo:
      return "a fifo";
    case std::filesystem::file_type::socket:
      return "a socket";
    default:
      return "not a regular file";
  }
}

// Refuses an existing `path` that is not a regular file (followed through a link): the rename
// that commits a write would replace it, a device node or a fifo included.
void check_replaceable(const std::filesystem::path& path, std::string_view what) {
  std::error_code ec;
  const std::filesystem::file_status status = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(status) || std::filesystem::is_regular_file(status)) return;
  const bool link = std::filesystem::is_symlink(std::filesystem::symlink_status(path, ec));
  fail("{} {}: {}{}, not a regular file: give a file name (the output replaces what is there)",
       what, path.string(), link ? "links to " : "is ", kind_of(status.type()));
}

}  // namespace

AtomicFile::AtomicFile(std::filesystem::path path)
    : path_(std::move(path)), temp_path_(fmt::format("{}.tmp.{}", path_.string(), ::getpid())) {
  fd_ = ::open(temp_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) fail_write(path_.string(), errno, "");
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(temp_path_.c_str());
}

void AtomicFile::write(std::span<const std::byte> bytes) {
  ZL_CHECK(fd_ >= 0, "{}: written after commit", path_.string());
  if (!write_all(fd_, bytes.data(), bytes.size())) fail_write(path_.string(), errno, " (writing the data)");
}

void AtomicFile::commit() {
  const std::string shown = path_.string();
  ZL_CHECK(fd_ >= 0, "{}: committed twice", shown);
  if (::fsync(fd_) != 0) fail_write(shown, errno, " (flushing to disk)");
  const int closed = ::close(std::exchange(fd_, -1));
  if (closed != 0) fail_write(shown, errno, " (closing the file)");
  if (::rename(temp_path_.c_str(), path_.c_str()) != 0) {
    fail_write(shown, errno, " (renaming the temporary file over it)");
  }
  committed_ = true;
  // Make the rename itself durable; some file systems refuse fsync on a directory, which only
  // weakens crash safety, so a failure here is not an error.
  FileDescriptor dir(::open(directory_of(path_).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir.get() >= 0) ::fsync(dir.get());
}

void write_file_atomically(const std::filesystem::path& path,
                           std::span<const std::span<const std::byte>> pieces) {
  AtomicFile file(path);
  for (const auto piece : pieces) file.write(piece);
  file.commit();
}

void write_file_atomically(const std::filesystem::path& path, std::string_view text) {
  const std::span<const std::byte> piece = std::as_bytes(std::span(text.data(), text.size()));
  write_file_atomically(path, std::span(&piece, 1));
}

void check_writable(const std::filesystem::path& path, std::string_view what) {
  ZL_CHECK(!path.empty(), "{} needs a file path", what);
  const std::filesystem::path directory = directory_of(path);
  std::error_code ec;
  ZL_CHECK(std::filesystem::is_directory(directory, ec),
           "{} {}: directory {} does not exist: create it or choose another path", what, path.string(),
           directory.string());
  check_replaceable(path, what);
  ZL_CHECK(::access(directory.c_str(), W_OK) == 0, "{} {}: directory {} is not writable: {}", what,
           path.string(), directory.string(), std::strerror(errno));
}

}  // namespace zl
