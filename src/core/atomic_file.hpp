// atomic_file.hpp — write a whole file so that readers see either the old file or the complete
// new one, never a partial write: a temporary beside it, flushed to disk, then renamed over it.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string_view>

namespace zl {

/// A file written in pieces that appears at `path` only on commit(): the bytes go to
/// `<path>.tmp.<pid>`, and commit() flushes them to disk and renames the temporary over `path`.
/// Destroyed without commit() (an error, an exception), it removes the temporary and leaves
/// `path` as it was. Errors are zl::Error naming the path, the reason and what to do.
class AtomicFile {
 public:
  /// Opens the temporary `<path>.tmp.<pid>` for writing; `path` itself is not touched until
  /// commit(). Throws zl::Error when the temporary cannot be created (a missing or unwritable
  /// directory).
  explicit AtomicFile(std::filesystem::path path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();
  /// Appends `bytes`.
  void write(std::span<const std::byte> bytes);
  /// fsync, rename over the target, fsync of the directory.
  void commit();

 private:
  std::filesystem::path path_;
  std::filesystem::path temp_path_;
  int fd_ = -1;
  bool committed_ = false;
};

/// Writes the concatenation of `pieces` to `path` atomically (a temporary `<path>.tmp.<pid>`,
/// fsync, rename, fsync of the directory). On failure throws zl::Error naming the path, the reason
/// and what to do, and leaves neither a temporary nor a changed `path` behind.
void write_file_atomically(const std::filesystem::path& path,
                           std::span<const std::span<const std::byte>> pieces);

/// Text overload of write_file_atomically.
void write_file_atomically(const std::filesystem::path& path, std::string_view text);

/// Throws zl::Error (naming `what`, e.g. "--save-final") unless a file could be created at `path`:
/// its directory exists and is writable, and `path` is new or a regular file (or a link to one),
/// never a directory, device, fifo or socket, which the rename that commits a write would replace.
/// Checked before long work so a bad path fails in a second, not after training.
void check_writable(const std::filesystem::path& path, std::string_view what);

}  // namespace zl
