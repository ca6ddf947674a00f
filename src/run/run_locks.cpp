// run_locks.cpp — the checkpoint folder's lock, then one beside each output file; once an
// output's lock is held, the temporaries a killed run left while writing it are removed.
#include "run/run_locks.hpp"

#include <algorithm>
#include <string>
#include <system_error>

#include "ckpt/checkpoint_folder.hpp"

namespace zl {

namespace {

namespace fs = std::filesystem;

// Removes "<name>.tmp.<pid digits>" beside `path` (AtomicFile's temporaries of it), which only a
// killed writer leaves: the caller holds the path's lock, so no other run is writing it.
void remove_stale_temporaries(const fs::path& path) {
  const std::string prefix = path.filename().string() + ".tmp.";
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    const bool temporary = name.size() > prefix.size() && name.starts_with(prefix) &&
                           std::all_of(name.begin() + static_cast<std::ptrdiff_t>(prefix.size()),
                                       name.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (temporary && entry.is_regular_file(error)) fs::remove(entry.path(), error);
  }
}

}  // namespace

std::vector<FileLock> lock_run_files(const RunPlan& plan) {
  std::vector<FileLock> locks;
  if (plan.saving()) locks.push_back(lock_checkpoint_folder(plan.checkpoints.dir));
  for (const OutputFile& output : plan.outputs) {
    std::filesystem::path lock_file = output.path;
    lock_file += ".lock";
    locks.emplace_back(lock_file, output.flag + " " + output.path.string(), "write to another path",
                       LockFileFate::Remove);
    remove_stale_temporaries(output.path);
  }
  return locks;
}

}  // namespace zl
