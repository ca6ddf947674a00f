// step_norm.cpp — the partials, their tree sums on the device, and the norm from them, whole or
// sharded.
#include "engines/step_norm.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "optim/grad_norm.hpp"

namespace zl {

NormPartials unscaled_partials(const std::vector<TypedSpan>& grads, double loss_scale,
                               Device& device) {
  std::int64_t blocks = 0;
  for (const TypedSpan& grad : grads) blocks += grad.elems / kNormBlockElems;
  // Every block of every unit gets its partial: nothing to zero first.
  NormPartials out{device.alloc_unset(MemCategory::CommBuffer, DType::F64, {blocks}), {}, &device};
  const std::span<double> all = out.partials.as<double>();
  std::size_t first = 0;
  for (const TypedSpan& grad : grads) {
    const std::span<double> unit =
        all.subspan(first, static_cast<std::size_t>(grad.elems / kNormBlockElems));
    first += unit.size();
    out.unit_blocks.push_back(std::ssize(unit));
    // Read as they are (16-bit, scaled): the gradients stay untouched for the update.
    device.block_sumsq_unscaled(tensor_of(grad), static_cast<float>(loss_scale), unit);
  }
  return out;
}

Buffer cover_sums(const NormPartials& partials, std::span<const std::int64_t> first_leaf,
                  std::span<const std::int64_t> slots) {
  const std::size_t units = partials.unit_blocks.size();
  ZL_CHECK(first_leaf.size() == units && slots.size() == units,
           "cover_sums: {} first leaves and {} slot counts for {} units", first_leaf.size(),
           slots.size(), units);
  std::int64_t total_slots = 0;
  for (const std::int64_t count : slots) total_slots += count;
  Buffer sums = partials.device->alloc_unset(MemCategory::CommBuffer, DType::F64, {total_slots});
  const std::span<const double> leaves = partials.partials.as<double>();
  std::size_t leaf = 0, slot = 0;
  for (std::size_t u = 0; u < units; ++u) {
    const auto blocks = static_cast<std::size_t>(partials.unit_blocks[u]);
    const std::size_t nodes = tree_cover(first_leaf[u], partials.unit_blocks[u]).size();
    ZL_CHECK(nodes <= static_cast<std::size_t>(slots[u]),
             "cover_sums: unit {} needs {} slots, has {}", u, nodes, slots[u]);
    partials.device->tree_cover_sums(leaves.subspan(leaf, blocks), first_leaf[u],
                                     sums.as<double>().subspan(slot, nodes));
    leaf += blocks;
    slot += static_cast<std::size_t>(slots[u]);
  }
  return sums;
}

double norm_from_partials(const NormPartials& partials) {
  const std::vector<std::int64_t> first_leaf(partials.unit_blocks.size(), 0);
  std::vector<std::int64_t> slots;
  for (const std::int64_t blocks : partials.unit_blocks) {
    slots.push_back(std::ssize(tree_cover(0, blocks)));
  }
  const Buffer sums = cover_sums(partials, first_leaf, slots);
  std::vector<double> host(static_cast<std::size_t>(sums.elems()));
  partials.device->copy_to_host(host.data(), sums.data(), static_cast<std::size_t>(sums.bytes()));
  std::vector<double> unit_sums;
  std::size_t slot = 0;
  for (std::size_t u = 0; u < slots.size(); ++u) {
    const auto count = static_cast<std::size_t>(slots[u]);
    const TreePiece whole{0, partials.unit_blocks[u],
                          std::span<const double>(host).subspan(slot, count)};
    unit_sums.push_back(tree_sum(partials.unit_blocks[u], std::span<const TreePiece>(&whole, 1)));
    slot += count;
  }
  return norm_from_unit_sums(unit_sums);
}

namespace {

// Places for unit u's tree sums in each rank's part of the norm's all_gather: the most cover nodes
// any rank's shard of it has (rank r holds blocks [r * S, (r + 1) * S) of a unit of S blocks a
// shard), so every rank's part is the same size.
std::int64_t norm_slots(const UnitLayout& unit, int world) {
  const std::int64_t blocks = unit.shard_elems / kNormBlockElems;
  std::int64_t most = 0;
  for (int r = 0; r < world; ++r) most = std::max(most, std::ssize(tree_cover(r * blocks, blocks)));
  return most;
}

}  // namespace

std::int64_t norm_sums_per_rank(const std::vector<UnitLayout>& layout, int world) {
  std::int64_t slots = 0;
  for (const UnitLayout& unit : layout) slots += norm_slots(unit, world);
  return slots;
}

double sharded_grad_norm(Comm& comm, Device& device, const std::vector<UnitLayout>& layout,
                         const NormPartials& own_partials) {
  // Each rank sums the largest tree nodes inside its shard of each unit on its device.
  const int world = comm.size();
  ZL_CHECK(own_partials.unit_blocks.size() == layout.size(),
           "sharded_grad_norm: partials of {} units for a model of {}",
           own_partials.unit_blocks.size(), layout.size());
  std::vector<std::int64_t> first_leaf, slots;
  for (std::size_t u = 0; u < layout.size(); ++u) {
    const std::int64_t blocks = layout[u].shard_elems / kNormBlockElems;
    ZL_CHECK(own_partials.unit_blocks[u] == blocks,
             "sharded_grad_norm: unit {} has {} partials, not its shard's {} blocks", u,
             own_partials.unit_blocks[u], blocks);
    first_leaf.push_back(comm.rank() * blocks);
    slots.push_back(norm_slots(layout[u], world));
  }
  const std::int64_t rank_slots = norm_sums_per_rank(layout, world);
  const Buffer own = cover_sums(own_partials, first_leaf, slots);
  Buffer recv = device.alloc_unset(MemCategory::CommBuffer, DType::F64, {rank_slots * world});
  comm.all_gather(own.data(), recv.data(), static_cast<std::size_t>(rank_slots), DType::F64);
  std::vector<double> gathered(static_cast<std::size_t>(recv.elems()));
  device.copy_to_host(gathered.data(), recv.data(), static_cast<std::size_t>(recv.bytes()));
  // Each unit's tree from every rank's nodes, then the units in order.
  const std::span<const double> all(gathered);
  std::vector<double> unit_sums;
  std::int64_t unit_slot = 0;
  for (std::size_t u = 0; u < layout.size(); ++u) {
    const std::int64_t blocks = layout[u].shard_elems / kNormBlockElems;
    std::vector<TreePiece> pieces;
    for (int r = 0; r < world; ++r) {
      const auto nodes = static_cast<std::size_t>(std::ssize(tree_cover(r * blocks, blocks)));
      pieces.push_back({r * blocks, blocks,
                        all.subspan(static_cast<std::size_t>(r * rank_slots + unit_slot), nodes)});
    }
    unit_sums.push_back(tree_sum(blocks * world, pieces));
    unit_slot += slots[u];
  }
  return norm_from_unit_sums(unit_sums);
}

}  // namespace zl
