// traffic_ledger.hpp — bytes each rank sends and receives per collective, using the volumes of
// the ring algorithms (the ones NCCL uses at scale and the ZeRO paper counts):
//   all_reduce      sends 2 (W-1)/W * S   (reduce-scatter then all-gather around the ring)
//   reduce_scatter  sends   (W-1)/W * S   (S = the full input, W blocks)
//   all_gather      sends   (W-1)/W * S   (S = the full output)
//   broadcast       a chain from the root: every rank but the last sends S, all but root receive S
// where S is the byte size of the whole buffer. Device-host copies (ZeRO-Offload) are counted
// apart from the collectives. When S is not a multiple of W, ring chunk c has
// floor(n/W) elements plus one for c < n mod W, and each rank skips the chunk it owns.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace zl {

/// The collective kinds the ledger counts. AllToAll comes last so the others keep their numbers.
enum class CollectiveKind : std::uint8_t {
  AllReduce,
  ReduceScatter,
  AllGather,
  Broadcast,
  Barrier,
  AllToAll
};

/// Number of CollectiveKind values.
inline constexpr int kCollectiveKindCount = 6;

/// "all_reduce", "reduce_scatter", "all_gather", "broadcast", "barrier" or "all_to_all".
std::string_view collective_name(CollectiveKind kind);

/// Bytes rank `rank` of `world` sends and receives in one collective.
struct RingVolume {
  std::int64_t sent_bytes = 0;  ///< bytes this rank puts on its outgoing link
  std::int64_t recv_bytes = 0;  ///< bytes this rank takes from its incoming link
};

/// Ring volume of one collective over a buffer of `elems` elements of `elem_bytes` each
/// (for reduce_scatter, all_gather and all_to_all, `elems` is the full, W-block buffer). `root`
/// is used by broadcast only. An all_to_all sends every block but its own straight to its rank,
/// and receives one block from each other rank.
RingVolume ring_volume(CollectiveKind kind, std::int64_t elems, std::int64_t elem_bytes, int rank,
                       int world, int root = 0);

/// Which links a collective's bytes cross in a world of nodes: those inside one node (NVLink),
/// those between nodes (the NICs), or both (a ring through the ranks of several nodes).
enum class LinkLevel : std::uint8_t { Inside, Across, Spanning };

/// Number of LinkLevel values.
inline constexpr int kLinkLevelCount = 3;

/// "inside", "across" or "spanning".
std::string_view link_level_name(LinkLevel level);

/// The level of a group of `ranks` ranks on `nodes` nodes, as many on each: one node, Inside;
/// one rank a node, Across; more, Spanning.
LinkLevel link_level_of(int ranks, int nodes);

/// Which way a copy between a rank's device and host memory goes (ZeRO-Offload, offload_param).
enum class HostCopy : std::uint8_t { ToHost, ToDevice };

/// "to_host" or "to_device", as the summaries name the ledger's copy totals.
std::string_view host_copy_name(HostCopy direction);

/// Which way a swap file's bytes go (ZeRO-Infinity's NVMe tier): into host memory or out of it.
enum class DiskIo : std::uint8_t { Read, Write };

/// Optimizer updates that streamed their state through a swap file (ZeRO-Infinity), summed: what
/// shows whether pipeline_read and pipeline_write hid the disk behind the AdamW kernels.
struct SwappedUpdates {
  std::int64_t updates = 0;  ///< how many
  double wall_ms = 0.0;      ///< their wall time, swaps and kernels together
  double adamw_ms = 0.0;     ///< of which the AdamW kernels (and offload's widening) ran
  double read_ms = 0.0;      ///< of which the swap file's reads were in flight
  double write_ms = 0.0;     ///< of which its writes were in flight
  std::int64_t read_bytes = 0;     ///< bytes those reads moved
  std::int64_t written_bytes = 0;  ///< bytes those writes moved (not the file's first write)
};

/// One rank's totals per collective kind.
class TrafficLedger {
 public:
  /// Adds one call of `kind` with the given volume.
  void record(CollectiveKind kind, RingVolume volume);
  /// Adds `sent_bytes` of a call to the bytes that crossed links of `level`: the backends call it
  /// beside record() with the call's sent bytes (and a decoded report with its totals).
  void record_level(LinkLevel level, std::int64_t sent_bytes) {
    level_sent_[static_cast<int>(level)] += sent_bytes;
  }
  /// Bytes sent by every collective so far (device-host copies not included).
  std::int64_t sent_bytes() const;
  /// Bytes received by every collective so far (device-host copies not included).
  std::int64_t recv_bytes() const;
  /// Bytes sent by collectives of `kind` (0 for barrier).
  std::int64_t sent_bytes(CollectiveKind kind) const { return sent_[index(kind)]; }
  /// Bytes received by collectives of `kind` (0 for barrier).
  std::int64_t recv_bytes(CollectiveKind kind) const { return recv_[index(kind)]; }
  /// Calls of `kind` recorded, async ones included, each counted once.
  std::int64_t calls(CollectiveKind kind) const { return calls_[index(kind)]; }
  /// Bytes sent by collectives whose bytes cross links of `level`; on the sim, mpi and nccl
  /// backends the levels add up to sent_bytes().
  std::int64_t sent_bytes(LinkLevel level) const { return level_sent_[static_cast<int>(level)]; }

  /// Adds a device-to-host copy of `bytes` (ZeRO-Offload's gradients going to the CPU update).
  void record_to_host(std::int64_t bytes) { to_host_bytes_ += bytes; }
  /// Adds a host-to-device copy of `bytes` (ZeRO-Offload's updated parameters coming back).
  void record_to_device(std::int64_t bytes) { to_device_bytes_ += bytes; }
  /// Adds a copy of `bytes` going `direction`: record_to_host() or record_to_device().
  void record_copy(HostCopy direction, std::int64_t bytes) {
    direction == HostCopy::ToHost ? record_to_host(bytes) : record_to_device(bytes);
  }
  /// Total bytes copied device to host (0 without offload).
  std::int64_t to_host_bytes() const { return to_host_bytes_; }
  /// Total bytes copied host to device (0 without offload).
  std::int64_t to_device_bytes() const { return to_device_bytes_; }

  /// Adds `bytes` moved `direction` between a swap file and host memory in `ms` of wall time.
  void record_disk(DiskIo direction, std::int64_t bytes, double ms) {
    disk_bytes_[disk_index(direction)] += bytes;
    disk_ms_[disk_index(direction)] += ms;
  }
  /// Bytes read from (or written to) swap files (0 without the NVMe tier).
  std::int64_t disk_bytes(DiskIo direction) const { return disk_bytes_[disk_index(direction)]; }
  /// Wall time of those reads (or writes), in ms.
  double disk_ms(DiskIo direction) const { return disk_ms_[disk_index(direction)]; }

  /// Adds one optimizer update that streamed its state through a swap file.
  void record_swapped_update(const SwappedUpdates& update) {
    swapped_.updates += update.updates;
    swapped_.wall_ms += update.wall_ms;
    swapped_.adamw_ms += update.adamw_ms;
    swapped_.read_ms += update.read_ms;
    swapped_.write_ms += update.write_ms;
    swapped_.read_bytes += update.read_bytes;
    swapped_.written_bytes += update.written_bytes;
  }
  /// The updates that streamed their state through a swap file, summed.
  const SwappedUpdates& swapped_updates() const { return swapped_; }

 private:
  static int index(CollectiveKind kind) { return static_cast<int>(kind); }
  static int disk_index(DiskIo direction) { return static_cast<int>(direction); }
  std::array<std::int64_t, kCollectiveKindCount> sent_{};
  std::array<std::int64_t, kCollectiveKindCount> recv_{};
  std::array<std::int64_t, kCollectiveKindCount> calls_{};
  std::array<std::int64_t, kLinkLevelCount> level_sent_{};
  std::int64_t to_host_bytes_ = 0;
  std::int64_t to_device_bytes_ = 0;
  std::array<std::int64_t, 2> disk_bytes_{};
  std::array<double, 2> disk_ms_{};
  SwappedUpdates swapped_;
};

}  // namespace zl
