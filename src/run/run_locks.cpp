// run_locks.cpp — the checkpoint folder's lock, then one beside each output file.
#include "run/run_locks.hpp"

#include "ckpt/checkpoint_folder.hpp"

namespace zl {

std::vector<FileLock> lock_run_files(const RunPlan& plan) {
  std::vector<FileLock> locks;
  if (plan.saving()) locks.push_back(lock_checkpoint_folder(plan.checkpoints.dir));
  for (const OutputFile& output : plan.outputs) {
    std::filesystem::path lock_file = output.path;
    lock_file += ".lock";
    locks.emplace_back(lock_file, output.flag + " " + output.path.string(), "write to another path",
                       LockFileFate::Remove);
  }
  return locks;
}

}  // namespace zl
