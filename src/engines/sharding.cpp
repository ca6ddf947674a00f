// sharding.cpp — unit gathers, shard reductions, the sharded norm and state assembly.
#include "engines/sharding.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "optim/grad_norm.hpp"

namespace zl {

Buffer gather_unit(Comm& comm, Device& device, const UnitLayout& unit, std::span<const float> shard,
                   MemCategory category) {
  Buffer full = device.alloc(category, DType::F32, {unit.padded_elems});
  comm.all_gather(shard.data(), full.data(), static_cast<std::size_t>(unit.shard_elems),
                  DType::F32);
  return full;
}

void reduce_scatter_unit(Comm& comm, std::span<const float> full, std::span<float> shard) {
  comm.reduce_scatter(full.data(), shard.data(), shard.size(), DType::F32, ReduceOp::Avg);
}

double sharded_grad_norm(Comm& comm, Device& device, const std::vector<UnitLayout>& layout,
                         const UnitSpans& grad_shards) {
  // Mine: [unit 0 blocks][unit 1 blocks]...; gathered: rank-major copies of that.
  std::vector<double> mine;
  for (const auto& shard : grad_shards) append_block_sumsq(shard, mine);
  const int world = comm.size();
  const auto count = static_cast<std::int64_t>(mine.size());
  Buffer send = device.alloc(MemCategory::CommBuffer, DType::F64, {count});
  Buffer recv = device.alloc(MemCategory::CommBuffer, DType::F64, {count * world});
  std::ranges::copy(mine, send.as<double>().begin());
  comm.all_gather(send.data(), recv.data(), mine.size(), DType::F64);
  const std::span<const double> gathered = recv.as<double>();
  // The unreduced model's order: unit by unit, and within a unit rank 0's blocks, rank 1's, ...
  std::vector<double> ordered;
  ordered.reserve(gathered.size());
  std::size_t unit_offset = 0;
  for (const auto& unit : layout) {
    const auto blocks = static_cast<std::size_t>(unit.shard_elems / kNormBlockElems);
    for (int r = 0; r < world; ++r) {
      const auto* first = gathered.data() + static_cast<std::size_t>(r) * mine.size() + unit_offset;
      ordered.insert(ordered.end(), first, first + blocks);
    }
    unit_offset += blocks;
  }
  return norm_from_partials(ordered);
}

void all_gather_params(Comm& comm, UnitBuffers& params, const std::vector<UnitLayout>& layout,
                       const EngineOptions& options, const Device& device) {
  const UnitSpans shards = own_shards(params, layout, comm.rank(), comm.size());
  for (std::size_t u = 0; u < layout.size(); ++u) {
    comm.all_gather(shards[u].data(), params[u].data(), shards[u].size(), DType::F32);
    notify(options, device, "all_gather", static_cast<int>(u));
  }
}

std::vector<std::vector<float>> gather_unpadded(Comm& comm, Device& device,
                                                const std::vector<UnitLayout>& layout,
                                                const UnitSpans& shards) {
  std::vector<std::vector<float>> copies;
  for (std::size_t u = 0; u < layout.size(); ++u) {
    const Buffer full = gather_unit(comm, device, layout[u], shards[u]);
    const auto real = full.as<float>().first(static_cast<std::size_t>(layout[u].numel));
    copies.emplace_back(real.begin(), real.end());
  }
  return copies;
}

std::vector<std::vector<float>> copy_shards(const UnitSpans& shards) {
  std::vector<std::vector<float>> copies;
  for (const auto shard : shards) copies.emplace_back(shard.begin(), shard.end());
  return copies;
}

void assign_shards(const UnitSpans& shards, const std::vector<std::vector<float>>& values) {
  ZL_CHECK(values.size() == shards.size(),
           "state has {} units but the model has {}: load a checkpoint of this model",
           values.size(), shards.size());
  for (std::size_t u = 0; u < shards.size(); ++u) {
    ZL_CHECK(
        values[u].size() == shards[u].size(),
        "unit {} shard has {} elements but this engine's shard has {}: reshard for this world size",
        u, values[u].size(), shards[u].size());
    std::ranges::copy(values[u], shards[u].begin());
  }
}

void load_full_from_shards(Comm& comm, UnitBuffers& full, const std::vector<UnitLayout>& layout,
                           const std::vector<std::vector<float>>& values) {
  const UnitSpans shards = own_shards(full, layout, comm.rank(), comm.size());
  assign_shards(shards, values);
  for (std::size_t u = 0; u < layout.size(); ++u) {
    comm.all_gather(shards[u].data(), full[u].data(), shards[u].size(), DType::F32);
  }
}

ShardState shard_state_with_sharded_adam(const Comm& comm, const std::vector<UnitLayout>& layout,
                                         UnitBuffers& params, AdamState& adam) {
  return {copy_shards(own_shards(params, layout, comm.rank(), comm.size())),
          copy_shards(spans_of(adam.exp_avg)), copy_shards(spans_of(adam.exp_avg_sq)),
          adam.updates};
}

void load_state_with_sharded_adam(Comm& comm, const std::vector<UnitLayout>& layout,
                                  UnitBuffers& params, AdamState& adam, const ShardState& state) {
  load_full_from_shards(comm, params, layout, state.params);
  assign_shards(spans_of(adam.exp_avg), state.exp_avg);
  assign_shards(spans_of(adam.exp_avg_sq), state.exp_avg_sq);
  adam.updates = state.adam_updates;
}

ModelState state_with_sharded_adam(Comm& comm, Device& device,
                                   const std::vector<UnitLayout>& layout, UnitBuffers& params,
                                   AdamState& adam) {
  return {unpadded_copy(layout, params),
          gather_unpadded(comm, device, layout, spans_of(adam.exp_avg)),
          gather_unpadded(comm, device, layout, spans_of(adam.exp_avg_sq))};
}

}  // namespace zl
