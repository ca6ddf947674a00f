// quantized_comm.cpp — qwZ's gather and qgZ's reduce on the engines' typed buffers, via the host.
#include "engines/quantized_comm.hpp"

#include <algorithm>
#include <span>
#include <vector>

#include "comm/quantized_collectives.hpp"
#include "core/error.hpp"

namespace zl {

Buffer gather_unit_quantized(Comm& comm, Device& device, const UnitLayout& unit, TypedSpan shard) {
  const std::vector<float> own = download_widened(device, shard);
  Buffer gathered = device.alloc_unset(MemCategory::Gathered, shard.dtype, {unit.padded_elems});
  const TypedSpan full = view_of(gathered);
  quantized_all_gather(comm, own, kQuantBlockElems, QuantBits::Int8,
                       [&](int r, std::span<const float> values) {
                         upload_rounded(device, values, full.slice(r * shard.elems, shard.elems));
                       });
  return gathered;
}

QuantizedReduceGroups make_quantized_reduce_groups(Comm& world, int node_ranks) {
  const int ranks = node_ranks == 0 ? world.size() : node_ranks;
  ZL_CHECK(ranks >= 1 && world.size() % ranks == 0,
           "nodes of {} ranks do not divide a world of {}: pass a --gpus-per-node that divides it",
           ranks, world.size());
  QuantizedReduceGroups groups;
  groups.world = world.size();
  groups.node = world.split(world.rank() / ranks);
  if (ranks < world.size()) groups.across = world.split(world.rank() % ranks);
  return groups;
}

void reduce_into_shard_quantized(QuantizedReduceGroups& groups, Device& device, TypedSpan grad,
                                 TypedSpan shard, bool first_micro_batch) {
  std::vector<float> sum(static_cast<std::size_t>(shard.elems));
  quantized_reduce_scatter_sum(
      *groups.node, groups.across.get(),
      [&](std::int64_t block, std::span<float> out) {
        const std::vector<float> values =
            download_widened(device, grad.slice(block * shard.elems, shard.elems));
        std::copy(values.begin(), values.end(), out.begin());
      },
      sum, kQuantBlockElems, QuantBits::Int4);
  for (float& value : sum) value /= static_cast<float>(groups.world);
  if (first_micro_batch) return upload_rounded(device, sum, shard);
  Buffer average = device.alloc_unset(MemCategory::CommBuffer, shard.dtype, {shard.elems});
  upload_rounded(device, sum, view_of(average));
  add_into(device, shard, view_of(average));
}

}  // namespace zl
