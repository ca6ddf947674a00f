// param_swap.hpp — ZeRO-Infinity's NVMe tier for ZeRO-3's parameters (offload_param on nvme):
// each own shard of a unit lives in a swap file on disk (features.param_nvme_path), in the
// training dtype, and comes into host memory (HostParams) only while it is held: for a gather,
// which copies it on to the device, and for the update, which writes it. The file's bytes are
// booked in the rank's ledger as NvmeParams; each unit's bytes are checked when read back, so a
// file changed, cut short or removed under the run is an error, never other numbers.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "core/buffer.hpp"
#include "core/swap_file.hpp"
#include "engines/optimizer_step.hpp"

namespace zl {

/// One rank's parameter shards on disk: unit u's `unit_elems[u]` elements of `dtype` (0: the unit
/// is not on disk). A unit never written reads as zeros.
class ParamSwap final : public HeldParams {
 public:
  /// Makes the swap file in `folder`, moving its bytes as `aio` says, and books its bytes in
  /// `device`'s ledger; disk traffic is noted in `comm`'s traffic ledger (may be null). Throws
  /// zl::Error in one line when the folder cannot hold it.
  ParamSwap(Device& device, Comm* comm, const std::filesystem::path& folder, DType dtype,
            std::vector<std::int64_t> unit_elems, const AioSettings& aio = {});
  /// Releases the booking; the file is removed.
  ~ParamSwap() override;
  ParamSwap(const ParamSwap&) = delete;
  ParamSwap& operator=(const ParamSwap&) = delete;

  /// True when unit `unit` lives on disk.
  bool on_disk(std::size_t unit) const { return unit_elems_.at(unit) > 0; }
  /// What stands for unit `unit` in a list of owned parameters while it is not held: no data, its
  /// elements and dtype.
  TypedSpan placeholder(std::size_t unit) const { return {nullptr, unit_elems_.at(unit), dtype_}; }
  /// Unit `unit` in host memory (read from the file by its first holder).
  TypedSpan hold(std::size_t unit) override;
  /// Lets go of unit `unit`; the last holder writes it back if any holder wrote it, then frees it.
  void release(std::size_t unit, bool written) override;
  /// The swap file.
  const SwapFile& file() const { return file_; }

 private:
  // Unit `unit`'s bytes, and every unit's (what the ledger books: the file pads each to pages).
  std::int64_t unit_bytes(std::size_t unit) const;
  std::int64_t total_bytes() const;

  Device& device_;
  Comm* comm_;
  DType dtype_;
  std::vector<std::int64_t> unit_elems_;
  std::vector<std::int64_t> offsets_;  // each unit's first byte in the file
  SwapFile file_;
  std::vector<Buffer> resident_;          // while held
  std::vector<int> holders_;              // per unit
  std::vector<char> dirty_;               // a holder wrote it since it came in
  std::vector<char> written_;             // 0: the unit still reads as zeros
  std::vector<std::uint64_t> checksums_;  // of each unit's bytes as last written
};

}  // namespace zl
