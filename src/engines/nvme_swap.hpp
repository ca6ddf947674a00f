// nvme_swap.hpp — ZeRO-Infinity's NVMe tier for the optimizer: the fp32 master and Adam's m and v
// of the units a rank updates live in a swap file on disk (features.nvme_path) and come into host
// memory only while they are used, unit by unit in the update. The file's bytes are booked in the
// rank's ledger as NvmeMaster and NvmeOptimizer (their bytes; the file pads each part to whole
// pages); each unit's bytes are checked when read back, so a file changed, cut short or removed
// under the run is an error, never other numbers. Reads and writes may be started and finished
// later (pipeline_read, pipeline_write: optimizer_swap.hpp), so a unit is on disk, coming in,
// held, or going out.
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <span>
#include <vector>

#include "comm/comm.hpp"
#include "core/memory_ledger.hpp"
#include "core/swap_file.hpp"

namespace zl {

/// Where a unit's master and moments are.
enum class Residency : std::uint8_t {
  OnDisk,   ///< in the file only; no host buffers
  Reading,  ///< a read into its host buffers is in flight (finish_read)
  Held,     ///< in host buffers, for holders() holders
  Writing,  ///< a write from its host buffers is in flight (finish_write)
};

/// One rank's optimizer state on disk: per unit, its master, m and v side by side in one swap
/// file (ZeRO-Offload always keeps a master). A unit never written reads as zeros.
class NvmeSwap {
 public:
  /// Makes the swap file for units of `unit_elems` fp32 elements each in `folder`
  /// ("zerolab-<pid>-<n>.swap", unique in this process), moving its bytes as `aio` says, and books
  /// its bytes in `ledger`. Throws zl::Error in one line when the folder cannot hold it.
  NvmeSwap(MemoryLedger& ledger, const std::filesystem::path& folder,
           std::vector<std::int64_t> unit_elems, const AioSettings& aio = {});
  /// Releases the booking; the file is removed.
  ~NvmeSwap();
  NvmeSwap(const NvmeSwap&) = delete;
  NvmeSwap& operator=(const NvmeSwap&) = delete;

  /// Starts writing unit `unit`'s state: `master`, `exp_avg` and `exp_avg_sq`, each of the unit's
  /// elements, which must stay as they are until finish_write(unit).
  void start_write(std::size_t unit, std::span<const float> master, std::span<const float> exp_avg,
                   std::span<const float> exp_avg_sq);
  /// Waits until unit `unit`'s write is on disk; zl::Error if it failed (a full disk).
  void finish_write(std::size_t unit);
  /// Starts reading unit `unit`'s state back into spans of its elements (zeros if it was never
  /// written), which finish_read(unit) hands over.
  void start_read(std::size_t unit, std::span<float> master, std::span<float> exp_avg,
                  std::span<float> exp_avg_sq);
  /// Waits until unit `unit`'s read is in; zl::Error if the file no longer holds what was written.
  void finish_read(std::size_t unit);
  /// start_write(), then finish_write().
  void write(std::size_t unit, std::span<const float> master, std::span<const float> exp_avg,
             std::span<const float> exp_avg_sq) {
    start_write(unit, master, exp_avg, exp_avg_sq);
    finish_write(unit);
  }
  /// start_read(), then finish_read().
  void read(std::size_t unit, std::span<float> master, std::span<float> exp_avg,
            std::span<float> exp_avg_sq) {
    start_read(unit, master, exp_avg, exp_avg_sq);
    finish_read(unit);
  }

  /// Elements of unit `unit`'s master, m and v each.
  std::int64_t unit_elems(std::size_t unit) const { return unit_elems_.at(unit); }
  /// Where unit `unit`'s state is (optimizer_swap.cpp moves it).
  Residency& residency(std::size_t unit) { return residency_.at(unit); }
  /// The units whose write-back is in flight, oldest first (optimizer_swap.cpp keeps it).
  std::deque<std::size_t>& writing() { return writing_; }
  /// The timeline's id of unit `unit`'s read or write in flight (Comm::disk_io_started; 0: none).
  std::int64_t& timeline_id(std::size_t unit) { return timeline_ids_.at(unit); }
  /// Bytes unit `unit`'s read or write moves: its master, m and v (a read of a unit never
  /// written moves none).
  std::int64_t io_bytes(std::size_t unit, IoDirection direction) const {
    const bool moves = direction == IoDirection::Write || written_.at(unit) != 0;
    return moves ? 3 * unit_elems_.at(unit) * static_cast<std::int64_t>(sizeof(float)) : 0;
  }
  /// How many holders want unit `unit` in host memory now (optimizer_swap.cpp's residency).
  int& holders(std::size_t unit) { return holders_.at(unit); }
  /// The swap file.
  SwapFile& file() { return file_; }
  /// The swap file, read-only.
  const SwapFile& file() const { return file_; }

 private:
  // The masters' bytes, every unit's (each moment's are the same).
  std::int64_t master_bytes() const;
  // Waits for every request of unit `unit` in flight (none outlives the bytes it moves), then
  // throws the first one's error, if any.
  void wait_requests(std::size_t unit);
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
  std::vector<Residency> residency_;      // residency(unit)
  std::deque<std::size_t> writing_;       // writing()
  std::vector<std::int64_t> timeline_ids_;  // timeline_id(unit)
  // Per unit, the requests in flight (one per part) and, for a read, where its bytes land.
  struct InFlight {
    std::vector<SwapIo> requests;
    std::span<const float> parts[3];
  };
  std::vector<InFlight> in_flight_;
};

/// The traffic ledger's and timeline's name of a swap file's read or write.
inline DiskIo disk_io_of(IoDirection direction) {
  return direction == IoDirection::Read ? DiskIo::Read : DiskIo::Write;
}

/// How record_disk_io() notes what a swap file moved.
enum class DiskRecord : std::uint8_t {
  Blocking,     ///< Comm::disk_io: the traffic ledger, and as blocking on a timeline
  TrafficOnly,  ///< the traffic ledger only: the caller noted the timeline's disk stream itself
};

/// What `file` has moved since it was last recorded, per direction that moved bytes, as `how`
/// says; nothing when `comm` is null.
void record_disk_io(Comm* comm, SwapFile& file, DiskRecord how = DiskRecord::Blocking);

}  // namespace zl
