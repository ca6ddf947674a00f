// checkpoint_folder.hpp — one run owns a checkpoint folder at a time, and leaves it tidy: an
// advisory lock on DIR/.lock for the run's life (the kernel drops it however the process ends, so
// a killed run never leaves the folder locked), the committed steps a folder holds, and the
// clean-up of what killed saves left behind (temporary files, a `latest` one commit behind).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

#include "core/file_lock.hpp"

namespace zl {

/// Exclusive ownership of checkpoint folder `dir` while the returned lock lives: creates `dir` if
/// needed and locks `dir`/.lock (core/file_lock.hpp; the file stays in the folder). Throws
/// zl::Error in one line if another run holds it ("checkpoint folder ... is in use by another run:
/// wait for it to end or save to another folder") or the folder cannot be created or locked.
FileLock lock_checkpoint_folder(const std::filesystem::path& dir);

/// The steps of `dir` that are committed (step-<N> directories holding a manifest.json), in
/// increasing order; empty if `dir` does not exist. Reads only.
std::vector<std::int64_t> committed_steps(const std::filesystem::path& dir);

/// What the run that owns `dir` (holding its CheckpointFolderLock) does before it saves: removes
/// the temporary files killed saves left (`*.tmp.<pid>` in `dir` and its step directories), and
/// when `resumed_step` is given, points `latest` at that step if it names another (a kill
/// between a step's manifest and `latest` leaves `latest` one step behind). Step directories
/// without a manifest stay: the next save of that step writes over them.
void tidy_checkpoint_folder(const std::filesystem::path& dir,
                            std::optional<std::int64_t> resumed_step);

}  // namespace zl
