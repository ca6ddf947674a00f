// sim_groups.hpp — the groups a simulated world's ranks split into (Comm::split): each group has
// its own rendezvous and timeline board, made by the first of its ranks to arrive and found by
// the others under the same key. A rank that fails or returns is marked in every group it
// belongs to, including groups made after it left, so no rank waits in a group for a rank that
// will never come.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.hpp"
#include "rendezvous.hpp"
#include "timeline.hpp"

namespace zl {

/// One group: its ranks (world ranks, in the group's order), where they meet, and where they
/// leave their ready times.
struct SimGroup {
  /// `world_ranks`: the group's ranks, each a world rank; its calls time out after `timeout`.
  SimGroup(int id, std::vector<int> world_ranks, std::chrono::milliseconds timeout);
  int id;                        ///< 1, 2, ... in the order the groups were made (0: the world)
  std::vector<int> world_ranks;  ///< rank r of the group is world rank world_ranks[r]
  Rendezvous rendezvous;         ///< the group's calls, numbered 1, 2, ... in the group
  TimelineBoard board;           ///< the group's calls' ready times
};

/// The groups of one SimWorld::run(). Thread-safe; it must outlive every SimComm of the run.
class SimGroups {
 public:
  /// Calls in a group time out after `timeout`, as the world's do.
  explicit SimGroups(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  /// The group that split number `split` of group `parent` (0: the world) makes for `color`, made
  /// now if this is its first rank to arrive; `world_ranks` are its ranks, the same for every one
  /// of them.
  SimGroup& join(int parent, std::int64_t split, int color, const std::vector<int>& world_ranks);

  /// World rank `rank`'s body threw `message`: every group holding it hears of it.
  void mark_failed(int rank, const std::string& message, ErrorKind kind);
  /// World rank `rank`'s body returned: every group holding it hears of it.
  void mark_returned(int rank);

 private:
  struct Fate {
    bool failed = false;  // else returned
    std::string message;
    ErrorKind kind = ErrorKind::Runtime;
  };
  // Tells `group` what became of world rank `rank`.
  static void tell(SimGroup& group, int rank, const Fate& fate);

  const std::chrono::milliseconds timeout_;
  std::mutex mutex_;
  std::map<std::tuple<int, std::int64_t, int>, std::unique_ptr<SimGroup>> groups_;
  std::map<int, Fate> left_;  // world ranks that failed or returned
};

}  // namespace zl
