// file_lock.hpp — one run at a time on a path: an exclusive flock(2) on a lock file, taken without
// waiting and held while the object lives. The kernel drops the lock however the process ends, so
// a killed run leaves at most the file, never the lock, and the next run takes the file over.
#pragma once

#include <filesystem>
#include <string_view>

namespace zl {

/// What becomes of a lock file when the FileLock holding it ends.
enum class LockFileFate {
  Keep,    ///< it stays: a folder's own `DIR/.lock`, part of the folder
  Remove,  ///< it is removed, still locked: a `<path>.lock` beside a file the user named
};

/// An exclusive lock on a lock file while the object lives. Two FileLocks on one path never both
/// hold it, even while a holder removes the file (a lock taken on a file that was removed
/// meanwhile is dropped and taken again on the file now at the path).
class FileLock {
 public:
  /// Opens `lock_file` (creating it if missing) and locks it without waiting. `what` names what
  /// the lock guards in messages ("checkpoint folder ck", "--metrics out.jsonl"); `instead` says
  /// what else the user can do ("save to another folder"). Throws zl::Error in one line: "<what>
  /// is in use by another run: wait for it to end or <instead>" when another process holds it,
  /// "cannot lock <what>: ..." when the file cannot be created or locked.
  FileLock(std::filesystem::path lock_file, std::string_view what, std::string_view instead,
           LockFileFate fate);
  /// Removes the file (LockFileFate::Remove, unless another file replaced it) and unlocks.
  ~FileLock();
  /// Takes over `other`'s lock; `other` holds nothing afterwards.
  FileLock(FileLock&& other) noexcept;
  FileLock& operator=(FileLock&&) = delete;
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  /// The lock file.
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
  LockFileFate fate_;
  int fd_ = -1;
};

}  // namespace zl
