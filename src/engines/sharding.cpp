// sharding.cpp — unit gathers, shard reductions, the sharded norm and state assembly.
#include "engines/sharding.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "core/error.hpp"
#include "engines/optimizer_swap.hpp"
#include "optim/grad_norm.hpp"

namespace zl {

namespace {

// Elements of each rank's shard that one call of at most `bucket_elems` in all may carry.
std::int64_t piece_elems(std::int64_t bucket_elems, int world) {
  return std::max<std::int64_t>(1, bucket_elems / world);
}

// Rank r's `count` elements of a packed gather go to [r * shard_elems + begin, ...) of `full`.
void unpack_gathered(Device& device, TypedSpan packed, TypedSpan full, std::int64_t shard_elems,
                     std::int64_t begin, std::int64_t count, int world) {
  for (int r = 0; r < world; ++r) {
    copy_into(device, packed.slice(r * count, count), full.slice(r * shard_elems + begin, count));
  }
}

}  // namespace

void InFlight::wait() {
  for (CommHandle& handle : handles) handle.wait();
  if (finish) std::exchange(finish, nullptr)();
  handles.clear();
  buffers.clear();
}

void wait_all(std::vector<InFlight>& flights) {
  for (InFlight& flight : flights) flight.wait();
  flights.clear();
}

void bound_in_flight(std::vector<InFlight>& flights, std::size_t max_flights) {
  while (flights.size() > max_flights) {
    flights.front().wait();
    flights.erase(flights.begin());
  }
}

Buffer comm_copy(Device& device, TypedSpan grad) {
  Buffer bucket = device.alloc_unset(MemCategory::CommBuffer, grad.dtype, {grad.elems});
  copy_into(device, grad, view_of(bucket));
  return bucket;
}

InFlight reduce_into_shard(Comm& comm, Device& device, TypedSpan grad, TypedSpan shard,
                           bool first_micro_batch, std::int64_t bucket_elems, bool async,
                           bool grad_kept) {
  Buffer bucket;
  if (async && !grad_kept) {
    bucket = comm_copy(device, grad);
    grad = view_of(bucket);
  }
  Buffer reduced;
  TypedSpan target = shard;
  if (!first_micro_batch) {
    reduced = device.alloc_unset(MemCategory::CommBuffer, shard.dtype, {shard.elems});
    target = view_of(reduced);
  }
  InFlight flight = start_reduce_scatter(comm, device, grad, target, bucket_elems, async);
  flight.buffers.push_back(std::move(bucket));
  flight.buffers.push_back(std::move(reduced));
  if (!first_micro_batch) {
    flight.finish = [&device, shard, target] { add_into(device, shard, target); };
  }
  if (!async) flight.wait();
  return flight;
}

Buffer gather_unit(Comm& comm, Device& device, const UnitLayout& unit, TypedSpan shard,
                   std::int64_t bucket_elems, MemCategory category) {
  Buffer full = device.alloc_unset(category, shard.dtype, {unit.padded_elems});  // gathered whole
  all_gather_into(comm, device, shard, view_of(full), bucket_elems);
  return full;
}

InFlight start_all_gather(Comm& comm, Device& device, TypedSpan shard, TypedSpan full,
                          std::int64_t bucket_elems, bool async) {
  InFlight flight;
  const int world = comm.size();
  const auto send_count = static_cast<std::size_t>(shard.elems);
  if (full.elems <= bucket_elems) {
    if (async) {
      flight.handles.push_back(comm.all_gather_async(shard.data, full.data, send_count, shard.dtype));
    } else {
      comm.all_gather(shard.data, full.data, send_count, shard.dtype);
    }
    return flight;
  }
  // Piece by piece: the same slice of every rank's shard, gathered packed, then unpacked.
  const std::int64_t piece = piece_elems(bucket_elems, world);
  std::vector<std::pair<std::int64_t, std::int64_t>> pieces;  // (begin, count), async only
  for (std::int64_t begin = 0; begin < shard.elems; begin += piece) {
    const std::int64_t count = std::min(piece, shard.elems - begin);
    Buffer packed = device.alloc_unset(MemCategory::CommBuffer, shard.dtype, {count * world});
    const void* send = shard.slice(begin, count).data;
    if (async) {
      flight.handles.push_back(comm.all_gather_async(send, packed.data(),
                                                     static_cast<std::size_t>(count), shard.dtype));
      flight.buffers.push_back(std::move(packed));
      pieces.emplace_back(begin, count);
      continue;
    }
    comm.all_gather(send, packed.data(), static_cast<std::size_t>(count), shard.dtype);
    unpack_gathered(device, view_of(packed), full, shard.elems, begin, count, world);
  }
  if (async) {
    // The packed buffers stay in `flight` until the finish step has unpacked them.
    std::vector<TypedSpan> packed_views;
    for (Buffer& buffer : flight.buffers) packed_views.push_back(view_of(buffer));
    flight.finish = [&device, packed_views, pieces, full, shard_elems = shard.elems, world] {
      for (std::size_t i = 0; i < pieces.size(); ++i) {
        unpack_gathered(device, packed_views[i], full, shard_elems, pieces[i].first,
                        pieces[i].second, world);
      }
    };
  }
  return flight;
}

void all_gather_into(Comm& comm, Device& device, TypedSpan shard, TypedSpan full,
                     std::int64_t bucket_elems) {
  start_all_gather(comm, device, shard, full, bucket_elems, /*async=*/false).wait();
}

InFlight start_reduce_scatter(Comm& comm, Device& device, TypedSpan full, TypedSpan shard,
                              std::int64_t bucket_elems, bool async, ReduceOp op) {
  InFlight flight;
  const int world = comm.size();
  const auto recv_count = static_cast<std::size_t>(shard.elems);
  if (full.elems <= bucket_elems) {
    if (async) {
      flight.handles.push_back(
          comm.reduce_scatter_async(full.data, shard.data, recv_count, shard.dtype, op));
    } else {
      comm.reduce_scatter(full.data, shard.data, recv_count, shard.dtype, op);
    }
    return flight;
  }
  // Piece by piece: the same slice of every rank's part of `full`, packed, reduced into the
  // matching slice of the shard.
  const std::int64_t piece = piece_elems(bucket_elems, world);
  for (std::int64_t begin = 0; begin < shard.elems; begin += piece) {
    const std::int64_t count = std::min(piece, shard.elems - begin);
    Buffer packed = device.alloc_unset(MemCategory::CommBuffer, shard.dtype, {count * world});
    for (int r = 0; r < world; ++r) {
      copy_into(device, full.slice(r * shard.elems + begin, count),
                view_of(packed).slice(r * count, count));
    }
    void* recv = shard.slice(begin, count).data;
    if (async) {
      flight.handles.push_back(comm.reduce_scatter_async(
          packed.data(), recv, static_cast<std::size_t>(count), shard.dtype, op));
      flight.buffers.push_back(std::move(packed));
    } else {
      comm.reduce_scatter(packed.data(), recv, static_cast<std::size_t>(count), shard.dtype, op);
    }
  }
  return flight;
}

void reduce_scatter_unit(Comm& comm, Device& device, TypedSpan full, TypedSpan shard,
                         std::int64_t bucket_elems, ReduceOp op) {
  start_reduce_scatter(comm, device, full, shard, bucket_elems, /*async=*/false, op).wait();
}

InFlight start_all_reduce(Comm& comm, TypedSpan grad, std::int64_t bucket_elems, bool async,
                          ReduceOp op) {
  InFlight flight;
  for (std::int64_t begin = 0; begin < grad.elems; begin += bucket_elems) {
    const std::int64_t count = std::min(bucket_elems, grad.elems - begin);
    void* data = grad.slice(begin, count).data;
    if (async) {
      flight.handles.push_back(
          comm.all_reduce_async(data, static_cast<std::size_t>(count), grad.dtype, op));
    } else {
      comm.all_reduce(data, static_cast<std::size_t>(count), grad.dtype, op);
    }
  }
  return flight;
}

void all_reduce_unit(Comm& comm, TypedSpan grad, std::int64_t bucket_elems, ReduceOp op) {
  start_all_reduce(comm, grad, bucket_elems, /*async=*/false, op).wait();
}

Buffer step_loss_sum(Device& device) {
  return device.alloc(MemCategory::CommBuffer, DType::F32, {1});
}

float mean_loss_over_ranks(Comm& comm, Device& device, std::span<float> loss_sum,
                           std::int64_t micro_batches) {
  if (micro_batches > 1) device.divide(loss_sum, static_cast<float>(micro_batches));  // x / 1 is x
  comm.all_reduce(loss_sum.data(), 1, DType::F32, ReduceOp::Avg);
  float loss = 0.0f;
  device.copy_to_host(&loss, loss_sum.data(), sizeof(loss));
  return loss;
}

std::vector<InFlight> all_gather_params(Comm& comm, UnitBuffers& params,
                                        const std::vector<UnitLayout>& layout,
                                        const EngineOptions& options, Device& device) {
  const bool async = options.features.overlap_comm;
  const std::vector<TypedSpan> shards =
      owned_spans(params, layout, /*shard_of_full=*/true, comm.rank(), comm.size());
  std::vector<InFlight> flights;
  for (std::size_t u = 0; u < layout.size(); ++u) {
    flights.push_back(start_all_gather(comm, device, shards[u], view_of(params[u]),
                                       options.features.allgather_bucket_elems, async));
    notify(options, device, "all_gather", static_cast<int>(u));
  }
  return flights;
}

std::vector<std::vector<float>> gather_unpadded(Comm& comm, Device& device,
                                                const std::vector<UnitLayout>& layout,
                                                const UnitSpans& shards, bool keep) {
  std::vector<std::vector<float>> copies;
  for (std::size_t u = 0; u < layout.size(); ++u) {
    const TypedSpan shard{shards[u].data(), static_cast<std::int64_t>(shards[u].size()),
                          DType::F32};
    const Buffer full = gather_unit(comm, device, layout[u], shard, layout[u].padded_elems);
    copies.emplace_back();
    if (!keep) continue;  // it took part in the gather; rank 0 keeps the copy
    copies.back().resize(static_cast<std::size_t>(layout[u].numel));
    device.copy_to_host(copies.back().data(), full.data(), copies.back().size() * sizeof(float));
  }
  return copies;
}

std::vector<std::vector<float>> copy_shards(Device& device, const UnitSpans& shards) {
  std::vector<std::vector<float>> copies;
  for (const auto shard : shards) {
    copies.emplace_back(shard.size());
    device.copy_to_host(copies.back().data(), shard.data(), shard.size_bytes());
  }
  return copies;
}

void assign_shards(Device& device, const UnitSpans& shards,
                   const std::vector<std::vector<float>>& values) {
  ZL_CHECK(values.size() == shards.size(),
           "state has {} units but the model has {}: load a checkpoint of this model",
           values.size(), shards.size());
  for (std::size_t u = 0; u < shards.size(); ++u) {
    ZL_CHECK(
        values[u].size() == shards[u].size(),
        "unit {} shard has {} elements but this engine's shard has {}: reshard for this world size",
        u, values[u].size(), shards[u].size());
    device.copy_from_host(shards[u].data(), values[u].data(), shards[u].size_bytes());
  }
}

void load_full_from_shards(Comm& comm, Device& device, UnitBuffers& full,
                           const std::vector<UnitLayout>& layout,
                           const std::vector<std::vector<float>>& values) {
  const UnitSpans shards = own_shards(full, layout, comm.rank(), comm.size());
  assign_shards(device, shards, values);
  for (std::size_t u = 0; u < layout.size(); ++u) {
    comm.all_gather(shards[u].data(), full[u].data(), shards[u].size(), DType::F32);
  }
}

ShardState owned_shard_state(OptimizerState& state, const std::vector<TypedSpan>& owned_params,
                             Device& device) {
  return with_state_resident(state, device, [&] {
    return ShardState{copy_shards(device, fp32_params(state, owned_params)),
                      copy_shards(device, spans_of(state.adam.exp_avg)),
                      copy_shards(device, spans_of(state.adam.exp_avg_sq)), state.adam.updates,
                      state.scaler.state()};
  });
}

void load_owned_shard_state(OptimizerState& state, const std::vector<TypedSpan>& owned_params,
                            const ShardState& shards, Device& device) {
  with_state_resident(state, device, [&] {
    assign_shards(device, fp32_params(state, owned_params), shards.params);
    params_from_master(state, owned_params, device);
    assign_shards(device, spans_of(state.adam.exp_avg), shards.exp_avg);
    assign_shards(device, spans_of(state.adam.exp_avg_sq), shards.exp_avg_sq);
  });
  state.adam.updates = shards.adam_updates;
  if (shards.scaler && state.scaler.skips_overflows()) state.scaler.load(*shards.scaler);
}

ModelState whole_model_state(Device& device, const std::vector<UnitLayout>& layout,
                             OptimizerState& state, const std::vector<TypedSpan>& params,
                             bool keep) {
  if (!keep) return {};
  const auto real = [&](const UnitSpans& spans) {
    UnitSpans first;
    for (std::size_t u = 0; u < layout.size(); ++u) {
      first.push_back(spans[u].first(static_cast<std::size_t>(layout[u].numel)));
    }
    return copy_shards(device, first);
  };
  return with_state_resident(state, device, [&] {
    return ModelState{real(fp32_params(state, params)), real(spans_of(state.adam.exp_avg)),
                      real(spans_of(state.adam.exp_avg_sq))};
  });
}

ModelState gather_model_state(Comm& comm, Device& device, const std::vector<UnitLayout>& layout,
                              OptimizerState& state, const std::vector<TypedSpan>& owned_params,
                              std::optional<bool> keep) {
  const bool kept = keep.value_or(comm.rank() == 0);
  return with_state_resident(state, device, [&] {
    return ModelState{gather_unpadded(comm, device, layout, fp32_params(state, owned_params), kept),
                      gather_unpadded(comm, device, layout, spans_of(state.adam.exp_avg), kept),
                      gather_unpadded(comm, device, layout, spans_of(state.adam.exp_avg_sq), kept)};
  });
}

}  // namespace zl
