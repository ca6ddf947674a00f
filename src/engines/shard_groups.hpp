// shard_groups.hpp — where a sharded engine's shards live: among all W ranks (ZeRO's stages as
// the paper draws them), or inside each node of G ranks with the nodes holding replicas of each
// other (--shard-group node: hybrid sharding, for the optimizer at ZeRO-1, the optimizer and the
// gradients at ZeRO-2, everything at ZeRO-3). ZeRO++'s qgZ reduces over the same two levels. Either
// way a unit's gradient reaches the own shard as the world's average in the reference's order
// (comm/reduce.hpp): one reduce_scatter (avg) over the world; or, with nodes,
//   a. reduce_scatter (sum) inside the node: the node's sum of the own shard, in the training
//      dtype (as a node's sum crosses between nodes)
//   b. all_reduce (sum) of that shard across the nodes, in fp32
//   c. one division by W, rounded once to the training dtype
// Checkpoints are the world's shards either way (ZeRO-3's), recut from the node's (reshard.hpp).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/comm.hpp"
#include "engines/engine.hpp"
#include "engines/partition.hpp"
#include "engines/sharding.hpp"
#include "engines/typed_span.hpp"
#include "ops/device.hpp"

namespace zl {

/// features.shard_group_ranks when it splits a world of `world` ranks into nodes, checked
/// (validate_shard_group); 0 when the world shards whole.
int checked_shard_group(const TrainingFeatures& features, int world);

/// The world and, with nodes, the two groups a hybrid-sharded engine splits it into.
class ShardGroups {
 public:
  /// With 0 < `group_ranks` < W, splits `world` (which must outlive this) into nodes of
  /// `group_ranks` consecutive ranks and the groups of rank i of every node (collective);
  /// otherwise the world alone shards. Throws zl::Error when `group_ranks` does not divide W.
  ShardGroups(Comm& world, int group_ranks);

  /// The ranks that shard among themselves: this rank's node, or the world.
  Comm& shards() { return node_ ? *node_ : world_; }
  /// Every rank: the micro-batches, the logged loss and the checkpoints' partition.
  Comm& world() { return world_; }
  /// Rank i of every node, in node order (the replica group); null when the world shards whole.
  Comm* across() { return across_.get(); }
  /// True when the shards live in nodes smaller than the world.
  bool hybrid() const { return node_ != nullptr; }

  /// The world's average of the unit gradient `grad` into `own`, this rank's shard of it in the
  /// shard group's layout (which may be `grad`'s own slice): set on the first micro-batch, added
  /// (add_into's rounding) after. `async`: the reduce_scatter (the node's, with nodes) runs
  /// while the caller goes on, from a copy of `grad` unless `grad_kept` (the caller keeps `grad`
  /// as it is until the wait); the wait adds the nodes' sums.
  InFlight reduce_into_own_shard(Device& device, TypedSpan grad, TypedSpan own,
                                 bool first_micro_batch, std::int64_t bucket_elems, bool async,
                                 bool grad_kept = false);

  /// The checkpoint shard (the world's partition, `world_layout`) of this rank, from `own`, its
  /// shards in the group's `layout`: `own` itself without nodes. Collective over the node.
  ShardState world_shard(const ShardState& own, const std::vector<UnitLayout>& layout,
                         const std::vector<UnitLayout>& world_layout);
  /// This rank's shards in the group's `layout` from its checkpoint shard `world_shard`:
  /// `world_shard` itself without nodes. Collective over the world.
  ShardState group_shard(const ShardState& world_shard, const std::vector<UnitLayout>& layout,
                         const std::vector<UnitLayout>& world_layout);

 private:
  Comm& world_;
  std::unique_ptr<Comm> node_;    // this rank's node, the shard group; null: the world shards
  std::unique_ptr<Comm> across_;  // rank i of every node, the replica group
};

}  // namespace zl
