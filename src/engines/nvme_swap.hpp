// nvme_swap.hpp — ZeRO-Infinity's NVMe tier for the optimizer: the fp32 master and Adam's m and v
// of the units a rank updates live in a swap file on disk (features.nvme_path) and come into host
// memory only while they are used, unit by unit in the update. The file's bytes are booked in the
// rank's ledger as NvmeMaster and NvmeOptimizer (their bytes; the file pads each part to whole
// pages); each unit's bytes are checked when read back, so a file changed, cut short or removed
// under the run is an error, never other numbers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>
#include <vector>

#include "comm/comm.hpp"
#include "core/memory_ledger.hpp"
#include "core/swap_file.hpp"

namespace zl {

/// One rank's optimizer state on disk: per unit, its master, m and v side by side in one swap
/// file (ZeRO-Offload always keeps a master). A unit never written reads as zeros.
class NvmeSwap {
 public:
  /// Makes the swap file for units of `unit_elems` fp32 elements each in `folder`
  /// ("zerolab-<pid>-<n>.swap", unique in this process), and books its bytes in `ledger`. Throws
  /// zl::Error in one line when the folder cannot hold it.
  NvmeSwap(MemoryLedger& ledger, const std::filesystem::path& folder,
           std::vector<std::int64_t> unit_elems);
  /// Releases the booking; the file is removed.
  ~NvmeSwap();
  NvmeSwap(const NvmeSwap&) = delete;
  NvmeSwap& operator=(const NvmeSwap&) = delete;

  /// Writes unit `unit`'s state: `master`, `exp_avg` and `exp_avg_sq`, each of the unit's
  /// elements.
  void write(std::size_t unit, std::span<const float> master, std::span<const float> exp_avg,
             std::span<const float> exp_avg_sq);
  /// Reads unit `unit`'s state back into spans of its elements (zeros if it was never written);
  /// zl::Error if the file no longer holds what was written.
  void read(std::size_t unit, std::span<float> master, std::span<float> exp_avg,
            std::span<float> exp_avg_sq);

  /// Elements of unit `unit`'s master, m and v each.
  std::int64_t unit_elems(std::size_t unit) const { return unit_elems_.at(unit); }
  /// How many holders want unit `unit` in host memory now (optimizer_step.cpp's residency).
  int& holders(std::size_t unit) { return holders_.at(unit); }
  /// The swap file.
  const SwapFile& file() const { return file_; }

 private:
  // The masters' bytes, every unit's (each moment's are the same).
  std::int64_t master_bytes() const;
  // Throws unless the three spans each hold unit `unit`'s elements.
  void check_sizes(std::size_t unit, std::size_t master, std::size_t exp_avg,
                   std::size_t exp_avg_sq) const;

  MemoryLedger& ledger_;
  std::vector<std::int64_t> unit_elems_;
  std::vector<std::int64_t> offsets_;  // each unit's first byte in the file
  SwapFile file_;
  std::vector<std::uint64_t> checksums_;  // of each unit's bytes as last written
  std::vector<char> written_;             // 0: the unit still reads as zeros
  std::vector<int> holders_;              // holders(unit)
};

/// What a swap file moved between its totals `before` and `now`, one Comm::disk_io per direction
/// that moved bytes (the traffic ledger, and the timeline of backends that keep one); nothing when
/// `comm` is null.
void record_disk_io(Comm* comm, const SwapTotals& before, const SwapTotals& now);

}  // namespace zl
