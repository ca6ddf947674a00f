// quantized_comm.cpp — qwZ's gather and qgZ's reduce on the engines' typed buffers, via the host.
#include "engines/quantized_comm.hpp"

#include <span>
#include <vector>

#include "comm/quantized_collectives.hpp"

namespace zl {

Buffer gather_unit_quantized(Comm& comm, Device& device, const UnitLayout& unit, TypedSpan shard) {
  std::vector<float> own(static_cast<std::size_t>(shard.elems));
  download_widened(device, shard, own);
  Buffer gathered = device.alloc_unset(MemCategory::Gathered, shard.dtype, {unit.padded_elems});
  const TypedSpan full = view_of(gathered);
  quantized_all_gather(comm, own, kQuantBlockElems, QuantBits::Int8,
                       [&](int r, std::span<const float> values) {
                         upload_rounded(device, values, full.slice(r * shard.elems, shard.elems));
                       });
  return gathered;
}

void reduce_into_shard_quantized(ShardGroups& groups, Device& device, TypedSpan grad,
                                 TypedSpan shard, bool first_micro_batch) {
  std::vector<float> sum(static_cast<std::size_t>(shard.elems));
  quantized_reduce_scatter_sum(
      groups.shards(), groups.across(),
      [&](std::int64_t block, std::span<float> out) {
        download_widened(device, grad.slice(block * shard.elems, shard.elems), out);
      },
      sum, kQuantBlockElems, QuantBits::Int4);
  for (float& value : sum) value /= static_cast<float>(groups.world().size());
  if (first_micro_batch) return upload_rounded(device, sum, shard);
  Buffer average = device.alloc_unset(MemCategory::CommBuffer, shard.dtype, {shard.elems});
  upload_rounded(device, sum, view_of(average));
  add_into(device, shard, view_of(average));
}

}  // namespace zl
