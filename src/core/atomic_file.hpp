// atomic_file.hpp — write a whole file so that readers see either the old file or the complete
// new one, never a partial write: a temporary beside it, flushed to disk, then renamed over it.
#pragma once

#include <cstddef>
#include <filesystem>
#include <span>
#include <string_view>

namespace zl {

/// Writes the concatenation of `pieces` to `path` atomically (a temporary `<path>.tmp.<pid>`,
/// fsync, rename, fsync of the directory). On failure throws zl::Error naming the path, the reason
/// and what to do, and leaves neither a temporary nor a changed `path` behind.
void write_file_atomically(const std::filesystem::path& path,
                           std::span<const std::span<const std::byte>> pieces);

/// Text overload of write_file_atomically.
void write_file_atomically(const std::filesystem::path& path, std::string_view text);

/// Throws zl::Error (naming `what`, e.g. "--save-final") unless a file could be created at `path`:
/// its directory exists and is writable and `path` is not a directory. Checked before long work so
/// a bad path fails in a second, not after training.
void check_writable(const std::filesystem::path& path, std::string_view what);

}  // namespace zl
