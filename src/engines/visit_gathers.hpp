// visit_gathers.hpp — ZeRO-3's parameter gathers, visit by visit. A micro-batch visits the units
// in the model's forward order and then in reverse for backward; each visit of a unit that is not
// kept whole needs the unit's full parameters, gathered when the visit comes or, within
// stage3_prefetch_bucket_size elements, right after the visit before it (with overlap_comm
// asynchronously, while that one computes). ZeRO-3 and ZeRO++ both gather so; the engine says how
// one gather starts (from which group, into which buffer) and this keeps the order, the budget and
// the gathers in flight. With shards on the NVMe tier, the reads of the visits after those run
// further ahead, as far as the swap buffers allow. Prefetching never changes a bit: each visit
// gets the same values.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "engines/micro_batch.hpp"
#include "engines/partition.hpp"
#include "engines/sharding.hpp"

namespace zl {

/// A gather started for one visit: the buffer it fills, the flight to wait for, and what must
/// live until then (offload_param's shard staged on the device).
struct VisitGather {
  Buffer params;    ///< the unit's full parameters, once `flight` is waited for
  InFlight flight;  ///< the gather's collectives (none left when it ran blocking)
  Buffer staged;    ///< offload_param: the shard copied to the device, held until the wait
};

/// The gathers of one engine's visits.
class VisitGathers {
 public:
  /// Starts the gather of `unit` for a forward or `backward` visit; `ahead` when it is a prefetch
  /// (which may run async), not the visit's own.
  using Start = std::function<VisitGather(int unit, bool backward, bool ahead)>;
  /// Starts reading from disk what the gather of `unit` for a forward or `backward` visit will
  /// need (offload_param's shards on the NVMe tier); false when nothing more can be read now.
  using ReadAhead = std::function<bool(int unit, bool backward)>;

  /// The visits of `forward_order` then its reverse; units whose `kept_whole` is true are never
  /// gathered. `within_pass`: prefetch only the visits of the same pass (forward or backward), for
  /// engines whose backward gathers read what the forward gathers left (ZeRO++'s hpZ).
  /// `read_ahead` (may be empty): after each visit, called for the visits after the gathers
  /// started, in order, until it returns false.
  VisitGathers(const std::vector<int>& forward_order, const std::vector<UnitLayout>& layout,
               std::vector<bool> kept_whole, std::int64_t prefetch_elems, bool within_pass,
               Start start, ReadAhead read_ahead = {});

  /// Starts a micro-batch: the next visit is the first, and its reads ahead start.
  void begin_micro_batch();
  /// The full parameters for the next visit, of `unit`: gathered ahead or now; then the visits
  /// after it are prefetched within the budget.
  UnitParams next(int unit);
  /// Passes the next visit, of a unit kept whole (the engine hands it its whole buffer).
  void skip() { ++next_visit_; }

 private:
  struct Ahead {
    std::size_t visit = 0;
    VisitGather gather;
  };
  void prefetch_after(std::size_t visit);
  // read_ahead_ for the visits from `first` on that no gather has started for yet.
  void read_ahead_from(std::size_t first);

  std::vector<int> visits_;  // the units of a micro-batch's visits, forward then backward
  const std::vector<UnitLayout>& layout_;
  std::vector<bool> kept_whole_;
  std::int64_t prefetch_elems_;
  bool within_pass_;
  Start start_;
  ReadAhead read_ahead_;
  std::size_t next_visit_ = 0;
  std::deque<Ahead> ahead_;  // gathers ahead of their visits, oldest first
};

}  // namespace zl
