// swap_folders.cpp — each rank folder made, locked by "<folder>/.lock" (removed, still locked,
// when the rank ends), cleared of a killed run's "*.swap" files, and removed after the lock; rank
// 0 clears and removes the unheld folders of ranks past the world too.
#include "run/swap_folders.hpp"

#include <cstdio>
#include <string>
#include <system_error>

#include "core/error.hpp"

namespace zl {

namespace fs = std::filesystem;

namespace {

// Removes the "*.swap" files in `folder`, which only a run that was killed leaves (the caller
// holds the folder's lock), and says so once on stderr when there were any.
void remove_stale_swap_files(const fs::path& folder) {
  std::error_code error;
  int removed = 0;
  for (const auto& entry : fs::directory_iterator(folder, error)) {
    if (entry.path().extension() == ".swap" && entry.is_regular_file(error) &&
        fs::remove(entry.path(), error)) {
      ++removed;
    }
  }
  if (removed == 0) return;
  std::fputs(fmt::format("zerolab: removed {} swap file{} a run that ended without cleaning up "
                         "left in {}\n",
                         removed, removed == 1 ? "" : "s", folder.string())
                 .c_str(),
             stderr);
}

}  // namespace

RankSwapFolders::RankSwapFolders(const TrainingFeatures& features, int rank, int world)
    : features_(features) {
  features_.nvme_path = hold(features.nvme_path, "--nvme-path", rank);
  features_.param_nvme_path = hold(features.param_nvme_path, "--param-nvme-path", rank);
  if (rank == 0) remove_stale_ranks(world);
}

void RankSwapFolders::remove_stale_ranks(int world) const {
  for (const Held& held : held_) {
    std::error_code error;
    for (const auto& entry : fs::directory_iterator(held.folder.parent_path(), error)) {
      const std::string name = entry.path().filename().string();
      int k = -1;
      if (!name.starts_with("rank") || std::sscanf(name.c_str(), "rank%d", &k) != 1 ||
          name != "rank" + std::to_string(k) || k < world) {
        continue;
      }
      try {
        const FileLock lock(entry.path() / ".lock", name, "", LockFileFate::Remove);
        remove_stale_swap_files(entry.path());
      } catch (const Error&) {
        continue;  // a live run's rank: its files are its own
      }
      fs::remove(entry.path(), error);  // fails, harmlessly, unless empty
    }
  }
}

std::string RankSwapFolders::hold(const std::string& named, const char* flag, int rank) {
  if (named.empty()) return {};
  std::error_code error;
  const fs::path canonical = fs::weakly_canonical(named, error);
  for (const Held& held : held_) {
    if (held.canonical == canonical) return held.folder.string();
  }
  const fs::path folder = fs::path(named) / kSwapFolderName / ("rank" + std::to_string(rank));
  fs::create_directories(folder, error);
  ZL_CHECK(!error, "cannot make the swap folder {}: {}: pass a {} folder this run can write",
           folder.string(), error.message(), flag);
  const std::string what = fmt::format("{} {}", flag, folder.string());
  const std::string instead = fmt::format("pass another {}", flag);
  held_.push_back(
      {canonical, folder,
       std::make_unique<FileLock>(folder / ".lock", what, instead, LockFileFate::Remove)});
  remove_stale_swap_files(folder);
  return folder.string();
}

RankSwapFolders::~RankSwapFolders() {
  for (Held& held : held_) {
    held.lock.reset();  // the lock file goes first, so the folder can go
    std::error_code error;
    fs::remove(held.folder, error);                // fails, harmlessly, unless empty
    fs::remove(held.folder.parent_path(), error);  // likewise
  }
}

}  // namespace zl
