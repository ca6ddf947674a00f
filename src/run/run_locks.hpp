// run_locks.hpp — what a run owns while it runs: its checkpoint folder (DIR/.lock, kept there)
// and every file it writes at its end (a `<path>.lock` beside each, removed when the run ends).
// Rank 0's process writes them all, so rank 0 takes the locks, before anything is written: a
// second run that names a folder or file a running run owns fails at its start, writing nothing.
#pragma once

#include <vector>

#include "core/file_lock.hpp"
#include "run/run_plan.hpp"

namespace zl {

/// Locks plan.checkpoints.dir (when saving) and every plan.outputs file, in that order, held until
/// the returned locks end. Throws zl::Error in one line naming the first one another run holds
/// ("--metrics m.jsonl is in use by another run: wait for it to end or write to another path");
/// the locks taken before it are dropped and their files removed.
std::vector<FileLock> lock_run_files(const RunPlan& plan);

}  // namespace zl
