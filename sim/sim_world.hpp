// sim_world.hpp — the collective simulator: W ranks as threads in one process, each with a
// SimComm. Collectives meet at a rendezvous keyed by each rank's call number; the reduction is
// comm/reduce.hpp's rank-order one, so results are deterministic and bit-exact. A mismatched
// call (op, dtype, count, root), a rank that throws or returns early, or a wait longer than the
// timeout becomes a zl::Error naming the ranks and calls involved, never a hang. Every rank keeps
// a timeline (timeline.hpp): simulated compute and comm clocks, readable after run().
#pragma once

#include <chrono>
#include <functional>
#include <vector>

#include "comm/comm.hpp"
#include "comm/reduce.hpp"
#include "comm/traffic_ledger.hpp"
#include "fault_injection.hpp"
#include "timeline.hpp"

namespace zl {

/// Settings of a simulated world.
struct SimOptions {
  /// Longest a rank waits in one collective for the others before failing with an error. The
  /// clock of a wait starts no earlier than when the last rank's thread started running.
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};
  /// Faults injected into the ranks' collective calls (see fault_injection.hpp).
  std::vector<FaultSpec> faults{};
  /// The ranks' timelines: link, compute scale, and what to record besides the step times.
  TimelineOptions timeline{};
  /// GPUs a node: ranks nG .. nG+G-1 share node n, and reductions sum each node's ranks first
  /// (comm/reduce.hpp). kOneNode (the default), 1 and W are the flat rank order.
  int gpus_per_node = kOneNode;
};

/// A world of `size()` simulated ranks.
class SimWorld {
 public:
  /// Throws zl::Error if world < 1, the timeout is not positive, gpus_per_node does not divide the
  /// world or a fault does not fit the world (validate_faults()).
  explicit SimWorld(int world, SimOptions options = {});
  /// Number of simulated ranks (threads) every run() starts, >= 1.
  int size() const { return world_; }

  /// Runs `body(comm)` once per rank, each on its own thread, and returns when all are done.
  /// If any rank fails, throws zl::Error whose message names the first failing rank and its
  /// error ("rank 2: ..."); the other ranks' pending collectives fail instead of hanging. Every
  /// thread has been joined when it returns or throws. An injected fault leads the message
  /// ("rank 2: injected fault at all_gather #5 (call #17)..."); one whose call never came is an
  /// error too.
  void run(const std::function<void(Comm&)>& body);

  /// Traffic ledger of rank `rank` after the last run().
  const TrafficLedger& traffic(int rank) const {
    return traffic_.at(static_cast<std::size_t>(rank));
  }

  /// Timeline of rank `rank` after the last run(): its step times and, as SimOptions::timeline
  /// asks, its program and events.
  const TimelineRecord& timeline(int rank) const {
    return timelines_.at(static_cast<std::size_t>(rank));
  }

 private:
  int world_;
  SimOptions options_;
  std::vector<TrafficLedger> traffic_;
  std::vector<TimelineRecord> timelines_;
};

}  // namespace zl
