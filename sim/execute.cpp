// execute.cpp — the data movement of each collective, computed for all ranks at once.
//
// Two paths, the same bits. The direct path works tile by tile straight from the ranks' inputs
// into their outputs: each tile of a reduction is reduced into a small cache-resident scratch
// (reduce_rank_order, so the rank order is unchanged) and copied to every output that needs it,
// and big collectives split their elements over a few threads. Every element is computed from
// the same inputs in the same order whatever the tiling or threading, so results do not change.
// It needs outputs that overlap no input except NCCL's in-place forms (all_reduce in place,
// reduce_scatter's recv = send + r * count, all_gather's send = recv + r * count); any other
// overlap takes the staged path, which computes everything into one scratch buffer first.
// Collectives whose outputs are too big to stay cached write them with streaming stores
// (stream_copy.hpp), so the memory moves each output byte once, as a large memcpy does.
#include "execute.hpp"

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

#include "collective_memory.hpp"
#include "comm/reduce.hpp"
#include "stream_copy.hpp"

namespace zl {

namespace {

using Bytes = std::vector<std::byte>;

// A tile of a reduction: W input tiles and the scratch stay in L2 for W up to 8 and more.
constexpr std::size_t kTileBytes = std::size_t{32} << 10;
// Below this much data moved per thread, a helper thread costs more than it saves.
constexpr std::size_t kMinBytesPerThread = std::size_t{4} << 20;
// From this many bytes written (half this machine class's last-level cache), outputs would be
// evicted before anyone reads them: they are streamed to memory instead.
constexpr std::size_t kStreamMinBytes = std::size_t{16} << 20;

void copy_bytes(void* dst, const void* src, std::size_t size_bytes) {
  if (size_bytes > 0 && dst != src) std::memcpy(dst, src, size_bytes);
}

const std::byte* block(const void* base, std::size_t index, std::size_t block_bytes) {
  return static_cast<const std::byte*>(base) + index * block_bytes;
}

std::byte* block(void* base, std::size_t index, std::size_t block_bytes) {
  return static_cast<std::byte*>(base) + index * block_bytes;
}

// ---- the direct path ----------------------------------------------------------------------

// A byte range of one buffer.
struct Range {
  const std::byte* begin;
  std::size_t size_bytes;
};

bool overlap(Range a, Range b) {
  if (a.size_bytes == 0 || b.size_bytes == 0) return false;
  return a.begin < b.begin + b.size_bytes && b.begin < a.begin + a.size_bytes;
}

Range send_range(const CallDesc& call, std::size_t world, std::size_t block_bytes) {
  const std::size_t blocks = call.kind == CollectiveKind::ReduceScatter ? world : 1;
  return {static_cast<const std::byte*>(call.send), blocks * block_bytes};
}

Range recv_range(const CallDesc& call, std::size_t world, std::size_t block_bytes) {
  const std::size_t blocks = call.kind == CollectiveKind::AllGather ? world : 1;
  return {static_cast<const std::byte*>(call.recv), blocks * block_bytes};
}

// True when rank r's recv and send are the collective's in-place form.
bool in_place_form(const CallDesc& call, std::size_t r, std::size_t block_bytes) {
  switch (call.kind) {
    case CollectiveKind::ReduceScatter:
      return call.recv == block(call.send, r, block_bytes);
    case CollectiveKind::AllGather:
      return call.send == block(call.recv, r, block_bytes);
    default:
      return call.send == call.recv;
  }
}

// True when no output overlaps another rank's buffers, nor its own send except in place.
bool direct_path_is_safe(std::span<const CallDesc> calls, std::size_t block_bytes) {
  const std::size_t world = calls.size();
  for (std::size_t r = 0; r < world; ++r) {
    const Range out = recv_range(calls[r], world, block_bytes);
    if (overlap(out, send_range(calls[r], world, block_bytes)) &&
        !in_place_form(calls[r], r, block_bytes)) {
      return false;
    }
    for (std::size_t q = 0; q < world; ++q) {
      if (q == r) continue;
      if (overlap(out, send_range(calls[q], world, block_bytes)) ||
          overlap(out, recv_range(calls[q], world, block_bytes))) {
        return false;
      }
    }
  }
  return true;
}

// Writes `size_bytes` of `src` to `dst`, with streaming stores when `stream`.
void write_out(std::byte* dst, const std::byte* src, std::size_t size_bytes, bool stream) {
  if (!stream) return copy_bytes(dst, src, size_bytes);
  if (size_bytes > 0 && dst != src) stream_copy(dst, src, size_bytes);
}

// How one part of the direct path writes: a cache-resident tile for reductions (made by the
// first), and whether outputs are streamed.
struct TileWriter {
  std::unique_ptr<std::byte[]> scratch;
  bool stream = false;
};

// Reduces elements [begin, end) of blocks `inputs` (one per rank) into every pointer of
// `outputs`, tile by tile through the writer's scratch.
void reduce_tiles(const std::vector<const std::byte*>& inputs,
                  const std::vector<std::byte*>& outputs, std::size_t begin, std::size_t end,
                  const CallDesc& call, TileWriter& writer) {
  const std::size_t elem_bytes = dtype_bytes(call.dtype);
  const std::size_t tile_elems = std::max<std::size_t>(1, kTileBytes / elem_bytes);
  std::vector<const void*> tile_inputs(inputs.size());
  if (!writer.scratch) {
    writer.scratch =
        std::make_unique_for_overwrite<std::byte[]>(std::min(end - begin, tile_elems) * elem_bytes);
  }
  for (std::size_t lo = begin; lo < end; lo += tile_elems) {
    const std::size_t elems = std::min(tile_elems, end - lo);
    for (std::size_t r = 0; r < inputs.size(); ++r) tile_inputs[r] = inputs[r] + lo * elem_bytes;
    reduce_rank_order(tile_inputs, writer.scratch.get(), elems, call.dtype, call.op,
                      call.gpus_per_node);
    for (std::byte* out : outputs) {
      write_out(out + lo * elem_bytes, writer.scratch.get(), elems * elem_bytes, writer.stream);
    }
  }
}

// Copies bytes [begin, end) of `src` into every pointer of `outputs`, tile by tile, so each tile
// of the source is read from memory once and copied on from the cache.
void copy_tiles(const std::byte* src, const std::vector<std::byte*>& outputs, std::size_t begin,
                std::size_t end, bool stream) {
  for (std::size_t lo = begin; lo < end; lo += kTileBytes) {
    const std::size_t size_bytes = std::min(kTileBytes, end - lo);
    for (std::byte* out : outputs) write_out(out + lo, src + lo, size_bytes, stream);
  }
}

// Elements [begin, end) of the per-rank count, for every rank.
void direct_range(std::span<const CallDesc> calls, std::size_t block_bytes, std::size_t begin,
                  std::size_t end, TileWriter& writer) {
  const CallDesc& call = calls.front();
  const std::size_t world = calls.size();
  const std::size_t elem_bytes = dtype_bytes(call.dtype);
  const std::size_t lo_bytes = begin * elem_bytes;
  const std::size_t range_bytes = (end - begin) * elem_bytes;
  std::vector<const std::byte*> inputs(world);
  std::vector<std::byte*> outputs;
  switch (call.kind) {
    case CollectiveKind::AllReduce:
      for (std::size_t r = 0; r < world; ++r) {
        inputs[r] = static_cast<const std::byte*>(calls[r].send);
        outputs.push_back(static_cast<std::byte*>(calls[r].recv));
      }
      return reduce_tiles(inputs, outputs, begin, end, call, writer);
    case CollectiveKind::ReduceScatter:  // rank r receives the reduction of everyone's block r
      for (std::size_t b = 0; b < world; ++b) {
        for (std::size_t r = 0; r < world; ++r) inputs[r] = block(calls[r].send, b, block_bytes);
        reduce_tiles(inputs, {static_cast<std::byte*>(calls[b].recv)}, begin, end, call, writer);
      }
      return;
    case CollectiveKind::AllGather:  // block b of every recv is rank b's send
      for (std::size_t b = 0; b < world; ++b) {
        const auto* send = static_cast<const std::byte*>(calls[b].send);
        std::vector<std::byte*> recvs;
        for (std::size_t r = 0; r < world; ++r) {
          recvs.push_back(block(calls[r].recv, b, block_bytes));
        }
        copy_tiles(send, recvs, lo_bytes, lo_bytes + range_bytes, writer.stream);
      }
      return;
    case CollectiveKind::Broadcast: {
      std::vector<std::byte*> recvs;
      for (const auto& c : calls) recvs.push_back(static_cast<std::byte*>(c.recv));
      const auto root = static_cast<std::size_t>(call.root);
      copy_tiles(static_cast<const std::byte*>(calls[root].send), recvs, lo_bytes,
                 lo_bytes + range_bytes, writer.stream);
      return;
    }
    case CollectiveKind::AllToAll:  // staged only (execute_collective)
    case CollectiveKind::Barrier:
      return;
  }
}

// Splits the count over up to hardware_concurrency threads (the caller included) when each
// moves at least kMinBytesPerThread, in parts of whole cache lines of every block.
void execute_direct(std::span<const CallDesc> calls, std::size_t block_bytes) {
  const CallDesc& call = calls.front();
  const std::size_t count = call.count;
  const std::size_t elem_bytes = dtype_bytes(call.dtype);
  const std::size_t moved_bytes = 2 * calls.size() * block_bytes;
  const std::size_t written_bytes =
      calls.size() * block_bytes * (call.kind == CollectiveKind::AllGather ? calls.size() : 1);
  const std::size_t threads = std::clamp<std::size_t>(
      moved_bytes / kMinBytesPerThread, 1, std::min(max_collective_threads(), count + 1));
  const std::size_t line_elems = std::max<std::size_t>(1, 64 / elem_bytes);
  const std::size_t per_thread =
      ((count + threads - 1) / threads + line_elems - 1) / line_elems * line_elems;
  // In place, the outputs are the inputs just read: their lines are cached already, so plain
  // stores cost no extra read and leave them cached.
  const bool stream =
      written_bytes >= kStreamMinBytes && !in_place_form(calls.front(), 0, block_bytes);
  auto run_part = [&](std::size_t t) {
    TileWriter writer;
    writer.stream = stream;
    const std::size_t begin = std::min(count, t * per_thread);
    direct_range(calls, block_bytes, begin, std::min(count, begin + per_thread), writer);
    if (writer.stream) stream_fence();
  };
  // A part that throws (a dtype the reduction does not support) fails the call on the caller.
  std::vector<std::exception_ptr> errors(threads);
  auto run_caught = [&](std::size_t t) {
    try {
      run_part(t);
    } catch (...) {
      errors[t] = std::current_exception();
    }
  };
  {
    std::vector<std::jthread> helpers;
    for (std::size_t t = 1; t < threads; ++t) helpers.emplace_back(run_caught, t);
    run_caught(0);
  }
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

// ---- the staged path: everything into one scratch buffer, then out ----------------------

// Every rank's `recv` becomes `result`.
void write_to_all(std::span<const CallDesc> calls, const Bytes& result) {
  for (const auto& call : calls) copy_bytes(call.recv, result.data(), result.size());
}

void all_reduce(std::span<const CallDesc> calls, std::size_t block_bytes) {
  const CallDesc& call = calls.front();
  std::vector<const void*> inputs;
  for (const auto& c : calls) inputs.push_back(c.send);
  Bytes result(block_bytes);
  reduce_rank_order(inputs, result.data(), call.count, call.dtype, call.op, call.gpus_per_node);
  write_to_all(calls, result);
}

// Rank r receives the reduction of block r of every rank's send buffer.
void reduce_scatter(std::span<const CallDesc> calls, std::size_t block_bytes) {
  const CallDesc& call = calls.front();
  Bytes result(calls.size() * block_bytes);
  std::vector<const void*> inputs(calls.size());
  for (std::size_t b = 0; b < calls.size(); ++b) {
    for (std::size_t r = 0; r < calls.size(); ++r) inputs[r] = block(calls[r].send, b, block_bytes);
    reduce_rank_order(inputs, result.data() + b * block_bytes, call.count, call.dtype, call.op,
                      call.gpus_per_node);
  }
  for (std::size_t r = 0; r < calls.size(); ++r) {
    copy_bytes(calls[r].recv, block(result.data(), r, block_bytes), block_bytes);
  }
}

// Block r of every rank's recv is rank r's send.
void all_gather(std::span<const CallDesc> calls, std::size_t block_bytes) {
  Bytes result(calls.size() * block_bytes);
  for (std::size_t r = 0; r < calls.size(); ++r) {
    copy_bytes(result.data() + r * block_bytes, calls[r].send, block_bytes);
  }
  write_to_all(calls, result);
}

// Block b of rank r's recv is block r of rank b's send.
void all_to_all(std::span<const CallDesc> calls, std::size_t block_bytes) {
  const std::size_t world = calls.size();
  Bytes result(world * world * block_bytes);
  for (std::size_t r = 0; r < world; ++r) {
    for (std::size_t b = 0; b < world; ++b) {
      copy_bytes(result.data() + (r * world + b) * block_bytes,
                 block(calls[b].send, r, block_bytes), block_bytes);
    }
  }
  for (std::size_t r = 0; r < world; ++r) {
    copy_bytes(calls[r].recv, result.data() + r * world * block_bytes, world * block_bytes);
  }
}

void broadcast(std::span<const CallDesc> calls, std::size_t block_bytes) {
  const CallDesc& root = calls[static_cast<std::size_t>(calls.front().root)];
  const auto* root_data = static_cast<const std::byte*>(root.send);
  write_to_all(calls, Bytes(root_data, root_data + block_bytes));
}

void execute_staged(std::span<const CallDesc> calls, std::size_t block_bytes) {
  switch (calls.front().kind) {
    case CollectiveKind::AllReduce:
      return all_reduce(calls, block_bytes);
    case CollectiveKind::ReduceScatter:
      return reduce_scatter(calls, block_bytes);
    case CollectiveKind::AllGather:
      return all_gather(calls, block_bytes);
    case CollectiveKind::Broadcast:
      return broadcast(calls, block_bytes);
    case CollectiveKind::AllToAll:
      return all_to_all(calls, block_bytes);
    case CollectiveKind::Barrier:
      return;
  }
}

}  // namespace

std::size_t max_collective_threads() {
  return std::max(1u, std::thread::hardware_concurrency());
}

void execute_collective(std::span<const CallDesc> calls) {
  const CallDesc& call = calls.front();
  if (call.kind == CollectiveKind::Barrier) return;
  if (CollectiveMemory* space = collective_memory_of(calls)) return space->execute(calls);
  const std::size_t block_bytes = call.count * dtype_bytes(call.dtype);
  // Empty reductions stay staged, where reduce_rank_order still rejects an unsupported dtype.
  const bool empty_reduction = call.count == 0 && is_reduction(call.kind);
  // all_to_all moves small quantized pieces: it always takes the staged path.
  const bool staged_only = call.kind == CollectiveKind::AllToAll;
  if (!empty_reduction && !staged_only && direct_path_is_safe(calls, block_bytes)) {
    return execute_direct(calls, block_bytes);
  }
  execute_staged(calls, block_bytes);
}

}  // namespace zl
