// param_swap.hpp — ZeRO-Infinity's NVMe tier for ZeRO-3's parameters (offload_param on nvme):
// each own shard of a unit on disk lives in a swap file (features.param_nvme_path), in the
// training dtype, and comes into host memory only while it is held: for a gather, which copies it
// on to the device, and for the update, which writes it. It passes through a pool of
// offload_param.buffer_count swap buffers (HostParams), each the size of the largest shard on
// disk: reads start ahead of their holds (read_ahead, in the order of the visits and of the
// update) and written shards go out while the next ones are used, as long as a buffer is free for
// the next hold. The file's bytes are booked in the rank's ledger as NvmeParams; each unit's bytes
// are checked when read back, so a file changed, cut short or removed under the run is an error,
// never other numbers. Which shards are on disk at all is offload_param.max_in_cpu's
// (shards_on_disk).
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <vector>

#include "core/buffer.hpp"
#include "core/swap_file.hpp"
#include "engines/optimizer_step.hpp"

namespace zl {

/// Which offloaded shards go to disk (DeepSpeed's offload_param.max_in_cpu): the units in order,
/// `offloaded_elems[u]` elements each (0: not offloaded, never on disk), each kept in host memory
/// while it and those kept before it fit in `max_in_cpu_elems`; from the first that does not, all
/// are on disk.
std::vector<bool> shards_on_disk(const std::vector<std::int64_t>& offloaded_elems,
                                 std::int64_t max_in_cpu_elems);

/// The swap buffers (elements each) a pool for shards of `unit_elems` elements needs: the largest
/// (0 when none is on disk). Throws zl::Error in one line when one exceeds `buffer_elems`
/// (offload_param.buffer_size).
std::int64_t swap_buffer_elems(const std::vector<std::int64_t>& unit_elems,
                               std::int64_t buffer_elems);

/// The pool's shape: offload_param.buffer_count buffers of at most buffer_size elements.
struct ParamBuffers {
  int count = TrainingFeatures{}.param_buffer_count;  ///< buffers; 1: every read and write waits
  std::int64_t max_elems = TrainingFeatures{}.param_buffer_elems;  ///< elements one may hold
};

/// One rank's parameter shards on disk: unit u's `unit_elems[u]` elements of `dtype` (0: the unit
/// is not on disk). A unit never written reads as zeros.
class ParamSwap final : public HeldParams {
 public:
  /// Makes the swap file in `folder`, moving its bytes as `aio` says, and the pool of `buffers`
  /// (booked as HostParams), and books the file's bytes in `device`'s ledger; disk traffic is
  /// noted in `comm` (may be null). Throws zl::Error in one line when a shard exceeds the
  /// buffers or the folder cannot hold the file.
  ParamSwap(Device& device, Comm* comm, const std::filesystem::path& folder, DType dtype,
            std::vector<std::int64_t> unit_elems, ParamBuffers buffers,
            const AioSettings& aio = {});
  /// Ends what is in flight and releases the bookings; the file is removed.
  ~ParamSwap() override;
  ParamSwap(const ParamSwap&) = delete;
  ParamSwap& operator=(const ParamSwap&) = delete;

  /// True when unit `unit` lives on disk.
  bool on_disk(std::size_t unit) const { return unit_elems_.at(unit) > 0; }
  /// What stands for unit `unit` in a list of owned parameters while it is not held: no data, its
  /// elements and dtype.
  TypedSpan placeholder(std::size_t unit) const { return {nullptr, unit_elems_.at(unit), dtype_}; }
  /// Unit `unit` in a swap buffer: from a read started ahead, from a write still going out, or
  /// read now (the first holder's; a buffer is freed for it if none is).
  TypedSpan hold(std::size_t unit) override;
  /// Lets go of unit `unit`; the last holder starts writing it back if any holder wrote it (its
  /// buffer is free once the write ends), else frees its buffer.
  void release(std::size_t unit, bool written) override;
  /// Starts reading unit `unit` into a free buffer while one more stays free; true when it is
  /// coming, needs no read (not on disk, held, never written) or is on its way; false when no
  /// buffer can be spared.
  bool read_ahead(std::size_t unit) override;
  /// Ends every write in flight, and every read ahead no hold took (its unit stays on disk).
  void settle(bool unwinding) override;
  /// Holds served by a read started ahead, so far (what the pipeline saved a wait on).
  std::int64_t reads_ahead_taken() const { return reads_ahead_taken_; }
  /// The swap file.
  const SwapFile& file() const { return file_; }

 private:
  enum class State : std::uint8_t { OnDisk, Reading, Held, Writing };
  // Unit `unit`'s bytes, and every unit's (what the ledger books: the file pads each to pages).
  std::int64_t unit_bytes(std::size_t unit) const;
  std::int64_t total_bytes() const;
  // Unit `unit`'s bytes in its buffer, and the same as its typed span.
  std::span<std::byte> bytes_of(std::size_t unit);
  TypedSpan held_span(std::size_t unit);
  // A free buffer: ends the oldest write, or drops the newest read ahead, if none is.
  int take_buffer();
  // Moves unit `unit`'s bytes now (a read's are checked).
  void move_now(std::size_t unit, IoDirection direction);
  void start(std::size_t unit, IoDirection direction);
  // Waits for unit `unit`'s read or write; a read's bytes are checked.
  void finish(std::size_t unit);
  // Waits for unit `unit`'s request in flight, noting the wait and what the file moved.
  void wait_for(std::size_t unit);
  // Throws unless unit `unit`'s buffer holds the bytes last written.
  void check_read(std::size_t unit);
  void end_oldest_write();
  void drop_newest_read();
  void free_buffer(std::size_t unit);

  Device& device_;
  Comm* comm_;
  DType dtype_;
  std::vector<std::int64_t> unit_elems_;
  std::int64_t pool_elems_;            // each swap buffer's: checked before the file is made
  std::vector<std::int64_t> offsets_;  // each unit's first byte in the file
  SwapFile file_;
  std::vector<Buffer> pool_;
  std::vector<int> free_;                   // buffers no unit has
  std::vector<int> buffer_of_;              // per unit: its buffer, -1 on disk
  std::vector<State> state_;                // per unit
  std::vector<SwapIo> io_;                  // per unit: its read or write in flight
  std::vector<std::int64_t> timeline_ids_;  // per unit: Comm::disk_io_started's id (0: none)
  std::vector<int> holders_;                // per unit
  std::vector<char> dirty_;                 // a holder wrote it since it came in
  std::vector<char> written_;               // 0: the unit still reads as zeros
  std::vector<std::uint64_t> checksums_;  // of each unit's bytes as last written
  std::deque<std::size_t> writing_;       // writes in flight, oldest first
  std::deque<std::size_t> reading_;       // reads ahead in flight, oldest first
  std::int64_t reads_ahead_taken_ = 0;
};

}  // namespace zl
