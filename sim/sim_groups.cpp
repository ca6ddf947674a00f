// sim_groups.cpp — making and finding the groups of Comm::split, and telling them of ranks that
// left.
#include "sim_groups.hpp"

#include <algorithm>

namespace zl {

SimGroup::SimGroup(int id, std::vector<int> world_ranks, std::chrono::milliseconds timeout)
    : id(id),
      world_ranks(world_ranks),
      rendezvous(static_cast<int>(world_ranks.size()), timeout, kOneNode, world_ranks),
      board(static_cast<int>(world_ranks.size())) {}

SimGroup& SimGroups::join(int parent, std::int64_t split, int color,
                          const std::vector<int>& world_ranks) {
  const std::lock_guard lock(mutex_);
  auto& group = groups_[{parent, split, color}];
  if (!group) {
    group = std::make_unique<SimGroup>(static_cast<int>(groups_.size()), world_ranks, timeout_);
    // Every rank of the group is running (it split from a running group): waits have deadlines.
    for (int r = 0; r < static_cast<int>(world_ranks.size()); ++r)
      group->rendezvous.mark_started(r);
    for (const auto& [rank, fate] : left_) tell(*group, rank, fate);
  }
  return *group;
}

void SimGroups::mark_failed(int rank, const std::string& message, ErrorKind kind) {
  const std::lock_guard lock(mutex_);
  const Fate fate{.failed = true, .message = message, .kind = kind};
  left_[rank] = fate;
  for (auto& [key, group] : groups_) tell(*group, rank, fate);
}

void SimGroups::mark_returned(int rank) {
  const std::lock_guard lock(mutex_);
  const Fate fate{};
  left_[rank] = fate;
  for (auto& [key, group] : groups_) tell(*group, rank, fate);
}

void SimGroups::tell(SimGroup& group, int rank, const Fate& fate) {
  const auto it = std::ranges::find(group.world_ranks, rank);
  if (it == group.world_ranks.end()) return;
  const auto local = static_cast<int>(it - group.world_ranks.begin());
  if (fate.failed) {
    group.rendezvous.mark_failed(local, fate.message, fate.kind);
  } else {
    group.rendezvous.mark_returned(local);
  }
}

}  // namespace zl
