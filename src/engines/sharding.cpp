// sharding.cpp — unit gathers, shard reductions, the sharded norm and state assembly.
#include "engines/sharding.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "optim/grad_norm.hpp"

namespace zl {

namespace {

// Elements of each rank's shard that one call of at most `bucket_elems` in all may carry.
std::int64_t piece_elems(std::int64_t bucket_elems, int world) {
  return std::max<std::int64_t>(1, bucket_elems / world);
}

}  // namespace

Buffer gather_unit(Comm& comm, Device& device, const UnitLayout& unit, TypedSpan shard,
                   std::int64_t bucket_elems, MemCategory category) {
  Buffer full = device.alloc(category, shard.dtype, {unit.padded_elems});
  all_gather_into(comm, device, shard, view_of(full), bucket_elems);
  return full;
}

void all_gather_into(Comm& comm, Device& device, TypedSpan shard, TypedSpan full,
                     std::int64_t bucket_elems) {
  const int world = comm.size();
  if (full.elems <= bucket_elems) {
    comm.all_gather(shard.data, full.data, static_cast<std::size_t>(shard.elems), shard.dtype);
    return;
  }
  const std::int64_t piece = piece_elems(bucket_elems, world);
  for (std::int64_t begin = 0; begin < shard.elems; begin += piece) {
    const std::int64_t count = std::min(piece, shard.elems - begin);
    Buffer packed = device.alloc(MemCategory::CommBuffer, shard.dtype, {count * world});
    comm.all_gather(shard.slice(begin, count).data, packed.data(),
                    static_cast<std::size_t>(count), shard.dtype);
    for (int r = 0; r < world; ++r) {
      copy_into(view_of(packed).slice(r * count, count),
                full.slice(r * shard.elems + begin, count));
    }
  }
}

void reduce_scatter_unit(Comm& comm, Device& device, TypedSpan full, TypedSpan shard,
                         std::int64_t bucket_elems) {
  const int world = comm.size();
  if (full.elems <= bucket_elems) {
    comm.reduce_scatter(full.data, shard.data, static_cast<std::size_t>(shard.elems),
                        shard.dtype, ReduceOp::Avg);
    return;
  }
  const std::int64_t piece = piece_elems(bucket_elems, world);
  for (std::int64_t begin = 0; begin < shard.elems; begin += piece) {
    const std::int64_t count = std::min(piece, shard.elems - begin);
    Buffer packed = device.alloc(MemCategory::CommBuffer, shard.dtype, {count * world});
    for (int r = 0; r < world; ++r) {
      copy_into(full.slice(r * shard.elems + begin, count),
                view_of(packed).slice(r * count, count));
    }
    comm.reduce_scatter(packed.data(), shard.slice(begin, count).data,
                        static_cast<std::size_t>(count), shard.dtype, ReduceOp::Avg);
  }
}

void all_reduce_unit(Comm& comm, TypedSpan grad, std::int64_t bucket_elems) {
  for (std::int64_t begin = 0; begin < grad.elems; begin += bucket_elems) {
    const std::int64_t count = std::min(bucket_elems, grad.elems - begin);
    comm.all_reduce(grad.slice(begin, count).data, static_cast<std::size_t>(count), grad.dtype,
                    ReduceOp::Avg);
  }
}

double sharded_grad_norm(Comm& comm, Device& device, const std::vector<UnitLayout>& layout,
                         const std::vector<double>& own_partials) {
  // Mine: [unit 0 blocks][unit 1 blocks]...; gathered: rank-major copies of that.
  const int world = comm.size();
  const auto count = static_cast<std::int64_t>(own_partials.size());
  Buffer send = device.alloc(MemCategory::CommBuffer, DType::F64, {count});
  Buffer recv = device.alloc(MemCategory::CommBuffer, DType::F64, {count * world});
  std::ranges::copy(own_partials, send.as<double>().begin());
  comm.all_gather(send.data(), recv.data(), own_partials.size(), DType::F64);
  const std::span<const double> gathered = recv.as<double>();
  // The unsharded model's order: unit by unit, and within a unit rank 0's blocks, rank 1's, ...
  std::vector<double> ordered;
  ordered.reserve(gathered.size());
  std::size_t unit_offset = 0;
  for (const auto& unit : layout) {
    const auto blocks = static_cast<std::size_t>(unit.shard_elems / kNormBlockElems);
    for (int r = 0; r < world; ++r) {
      const auto* first =
          gathered.data() + static_cast<std::size_t>(r) * own_partials.size() + unit_offset;
      ordered.insert(ordered.end(), first, first + blocks);
    }
    unit_offset += blocks;
  }
  return norm_from_partials(ordered);
}

void all_gather_params(Comm& comm, UnitBuffers& params, const std::vector<UnitLayout>& layout,
                       const EngineOptions& options, Device& device) {
  const std::vector<TypedSpan> shards =
      owned_spans(params, layout, /*shard_of_full=*/true, comm.rank(), comm.size());
  for (std::size_t u = 0; u < layout.size(); ++u) {
    all_gather_into(comm, device, shards[u], view_of(params[u]),
                    options.features.allgather_bucket_elems);
    notify(options, device, "all_gather", static_cast<int>(u));
  }
}

std::vector<std::vector<float>> gather_unpadded(Comm& comm, Device& device,
                                                const std::vector<UnitLayout>& layout,
                                                const UnitSpans& shards) {
  std::vector<std::vector<float>> copies;
  for (std::size_t u = 0; u < layout.size(); ++u) {
    const TypedSpan shard{shards[u].data(), static_cast<std::int64_t>(shards[u].size()),
                          DType::F32};
    const Buffer full = gather_unit(comm, device, layout[u], shard, layout[u].padded_elems);
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

ShardState owned_shard_state(OptimizerState& state, const std::vector<TypedSpan>& owned_params) {
  return {copy_shards(fp32_params(state, owned_params)), copy_shards(spans_of(state.adam.exp_avg)),
          copy_shards(spans_of(state.adam.exp_avg_sq)), state.adam.updates,
          state.scaler.state()};
}

void load_owned_shard_state(OptimizerState& state, const std::vector<TypedSpan>& owned_params,
                            const ShardState& shards) {
  assign_shards(fp32_params(state, owned_params), shards.params);
  params_from_master(state, owned_params);
  assign_shards(spans_of(state.adam.exp_avg), shards.exp_avg);
  assign_shards(spans_of(state.adam.exp_avg_sq), shards.exp_avg_sq);
  state.adam.updates = shards.adam_updates;
  if (shards.scaler && state.scaler.dynamic()) state.scaler.load(*shards.scaler);
}

ModelState gather_model_state(Comm& comm, Device& device, const std::vector<UnitLayout>& layout,
                              OptimizerState& state, const std::vector<TypedSpan>& owned_params) {
  return {gather_unpadded(comm, device, layout, fp32_params(state, owned_params)),
          gather_unpadded(comm, device, layout, spans_of(state.adam.exp_avg)),
          gather_unpadded(comm, device, layout, spans_of(state.adam.exp_avg_sq))};
}

}  // namespace zl
