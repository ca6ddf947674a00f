// swap_folders.hpp — where one rank's swap files live for the length of a run (ZeRO-Infinity's
// NVMe tier): "<nvme_path>/zerolab-swap/rank<k>/" under each folder the run's features name,
// made and locked before the engine makes its files, emptied of the files a killed run left, and
// removed when the rank's run ends. A second live run that names the same nvme_path is refused at
// its start, in one line, before it writes anything there.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "core/file_lock.hpp"
#include "engines/engine.hpp"

namespace zl {

/// The folder under an nvme_path that holds a run's rank folders.
inline constexpr const char* kSwapFolderName = "zerolab-swap";

/// Rank `rank`'s swap folders, for features.nvme_path and features.param_nvme_path (one folder
/// when both name the same path), held while the object lives.
class RankSwapFolders {
 public:
  /// Makes and locks rank `rank`'s folders (of `world` ranks). Throws zl::Error in one line
  /// when another live run holds one ("--nvme-path DIR/zerolab-swap/rank0 is in use by another
  /// run: ...") or it cannot be made; the folders taken before it are let go. Swap files a killed
  /// run left there are removed (said on stderr): no live run holds them. Rank 0 also removes the
  /// folders of ranks past `world` that no live run holds, with their swap files: what a killed
  /// run of a larger world left.
  RankSwapFolders(const TrainingFeatures& features, int rank, int world);
  /// Lets go of each lock and removes each folder, and "zerolab-swap" above it once empty (a
  /// folder another run holds by then, or with files of the user's in it, stays).
  ~RankSwapFolders();
  RankSwapFolders(const RankSwapFolders&) = delete;
  RankSwapFolders& operator=(const RankSwapFolders&) = delete;

  /// The features made from, with nvme_path and param_nvme_path pointing at this rank's folders.
  const TrainingFeatures& features() const { return features_; }

 private:
  struct Held {
    std::filesystem::path canonical;  // the nvme_path, weakly canonical
    std::filesystem::path folder;     // nvme_path/zerolab-swap/rank<k>
    std::unique_ptr<FileLock> lock;
  };
  // The rank's folder under `named` (empty: none), made and held unless it is already, `flag`
  // naming the setting.
  std::string hold(const std::string& named, const char* flag, int rank);
  // Removes the rank folders past `world` under each held folder's parent that no run holds.
  void remove_stale_ranks(int world) const;
  std::vector<Held> held_;
  TrainingFeatures features_;
};

}  // namespace zl
