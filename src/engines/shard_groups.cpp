// shard_groups.cpp — the world or its nodes as shard groups: the split, the reduction in the
// reference's two-level order, and the checkpoints' recut.
#include "engines/shard_groups.hpp"

#include "core/error.hpp"
#include "engines/reshard.hpp"

namespace zl {

int checked_shard_group(const TrainingFeatures& features, int world) {
  const int group = features.shard_group_ranks;
  if (group <= 0 || group >= world) return 0;
  validate_shard_group(features, world);
  return group;
}

ShardGroups::ShardGroups(Comm& world, int group_ranks) : world_(world) {
  if (group_ranks <= 0 || group_ranks >= world.size()) return;
  ZL_CHECK(world.size() % group_ranks == 0,
           "nodes of {} ranks do not divide a world of {}: give --gpus-per-node a divisor of it",
           group_ranks, world.size());
  node_ = world.split(world.rank() / group_ranks);
  across_ = world.split(world.rank() % group_ranks);
}

InFlight ShardGroups::reduce_into_own_shard(Device& device, TypedSpan grad, TypedSpan own,
                                            bool first_micro_batch, std::int64_t bucket_elems,
                                            bool async, bool grad_kept) {
  if (!node_) {
    return reduce_into_shard(world_, device, grad, own, first_micro_batch, bucket_elems, async,
                             grad_kept);
  }
  // a. the node's sum of the own shard, rounded to the training dtype (async: from a copy of
  //    `grad`, unless the caller keeps it until the wait)
  InFlight flight;
  if (async && !grad_kept) {
    flight.buffers.push_back(comm_copy(device, grad));
    grad = view_of(flight.buffers.back());
  }
  Buffer node_sum = device.alloc_unset(MemCategory::CommBuffer, own.dtype, {own.elems});
  InFlight node = start_reduce_scatter(*node_, device, grad, view_of(node_sum), bucket_elems, async,
                                       ReduceOp::Sum);
  flight.handles = std::move(node.handles);
  for (Buffer& buffer : node.buffers) flight.buffers.push_back(std::move(buffer));
  // b. the nodes' sums added in fp32, in node order, and c. one division by W, one rounding:
  //    once the node's sum is there
  flight.finish = [this, &device, node_sum = view_of(node_sum), own, first_micro_batch,
                   bucket_elems] {
    Buffer total = device.alloc_unset(MemCategory::CommBuffer, DType::F32, {own.elems});
    widen(device, node_sum, total.as<float>());
    all_reduce_unit(*across_, view_of(total), bucket_elems, ReduceOp::Sum);
    device.divide(total.as<float>(), static_cast<float>(world_.size()));
    if (first_micro_batch) return round_into(device, total.as<float>(), own);
    round_into(device, total.as<float>(), node_sum);  // the average, then added
    add_into(device, own, node_sum);
  };
  flight.buffers.push_back(std::move(node_sum));
  if (!async) flight.wait();
  return flight;
}

ShardState ShardGroups::world_shard(const ShardState& own, const std::vector<UnitLayout>& layout,
                                    const std::vector<UnitLayout>& world_layout) {
  if (!node_) return own;
  return reshard_state(*node_, own, layout, world_layout, world_.rank());
}

ShardState ShardGroups::group_shard(const ShardState& world_shard,
                                    const std::vector<UnitLayout>& layout,
                                    const std::vector<UnitLayout>& world_layout) {
  if (!node_) return world_shard;
  return reshard_state(world_, world_shard, world_layout, layout, node_->rank());
}

}  // namespace zl
