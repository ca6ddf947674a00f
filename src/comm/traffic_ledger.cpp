// traffic_ledger.cpp — ring volumes and per-kind totals.
#include "comm/traffic_ledger.hpp"

#include "core/error.hpp"

namespace zl {

std::string_view collective_name(CollectiveKind kind) {
  switch (kind) {
    case CollectiveKind::AllReduce: return "all_reduce";
    case CollectiveKind::ReduceScatter: return "reduce_scatter";
    case CollectiveKind::AllGather: return "all_gather";
    case CollectiveKind::Broadcast: return "broadcast";
    case CollectiveKind::Barrier: return "barrier";
    case CollectiveKind::AllToAll:
      return "all_to_all";
  }
  fail("unknown collective kind {}", static_cast<int>(kind));
}

std::string_view host_copy_name(HostCopy direction) {
  return direction == HostCopy::ToHost ? "to_host" : "to_device";
}

namespace {

// Elements of ring chunk `chunk` when `elems` are cut into `world` near-equal chunks.
std::int64_t chunk_elems(std::int64_t elems, int world, int chunk) {
  return elems / world + (chunk < elems % world ? 1 : 0);
}

}  // namespace

RingVolume ring_volume(CollectiveKind kind, std::int64_t elems, std::int64_t elem_bytes, int rank,
                       int world, int root) {
  ZL_CHECK(world >= 1 && rank >= 0 && rank < world, "ring volume: rank {} of world {}", rank, world);
  const std::int64_t all_bytes = elems * elem_bytes;
  // In a ring pass rank r sends every chunk but chunk (r+1) mod W and receives every chunk but
  // its own (NCCL's ring: the chunk a rank ends up owning is the one it never forwards).
  const std::int64_t pass_sent = all_bytes - chunk_elems(elems, world, (rank + 1) % world) * elem_bytes;
  const std::int64_t pass_recv = all_bytes - chunk_elems(elems, world, rank) * elem_bytes;
  switch (kind) {
    case CollectiveKind::AllReduce: return {2 * pass_sent, 2 * pass_recv};
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather: return {pass_sent, pass_recv};
    case CollectiveKind::Broadcast: {
      const bool last_in_chain = rank == (root + world - 1) % world;
      return {last_in_chain ? 0 : all_bytes, rank == root ? 0 : all_bytes};
    }
    case CollectiveKind::Barrier: return {0, 0};
    case CollectiveKind::AllToAll: {
      const std::int64_t own_bytes = chunk_elems(elems, world, rank) * elem_bytes;
      return {all_bytes - own_bytes, all_bytes - own_bytes};
    }
  }
  fail("unknown collective kind {}", static_cast<int>(kind));
}

std::string_view link_level_name(LinkLevel level) {
  switch (level) {
    case LinkLevel::Inside:
      return "inside";
    case LinkLevel::Across:
      return "across";
    case LinkLevel::Spanning:
      return "spanning";
  }
  fail("unknown link level {}", static_cast<int>(level));
}

LinkLevel link_level_of(int ranks, int nodes) {
  if (nodes <= 1) return LinkLevel::Inside;
  return ranks == nodes ? LinkLevel::Across : LinkLevel::Spanning;
}

void TrafficLedger::record(CollectiveKind kind, RingVolume volume) {
  sent_[index(kind)] += volume.sent_bytes;
  recv_[index(kind)] += volume.recv_bytes;
  calls_[index(kind)] += 1;
}

std::int64_t TrafficLedger::sent_bytes() const {
  std::int64_t total = 0;
  for (const auto bytes : sent_) total += bytes;
  return total;
}

std::int64_t TrafficLedger::recv_bytes() const {
  std::int64_t total = 0;
  for (const auto bytes : recv_) total += bytes;
  return total;
}

}  // namespace zl
