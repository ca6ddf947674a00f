// execute.cpp — the data movement of each collective, computed by one thread for all ranks.
#include "execute.hpp"

#include <cstring>
#include <vector>

#include "comm/reduce.hpp"

namespace zl {

namespace {

using Bytes = std::vector<std::byte>;

void copy_bytes(void* dst, const void* src, std::size_t size_bytes) {
  if (size_bytes > 0) std::memcpy(dst, src, size_bytes);
}

const std::byte* block(const void* base, std::size_t index, std::size_t block_bytes) {
  return static_cast<const std::byte*>(base) + index * block_bytes;
}

// Every rank's `recv` becomes `result`.
void write_to_all(std::span<const CallDesc> calls, const Bytes& result) {
  for (const auto& call : calls) copy_bytes(call.recv, result.data(), result.size());
}

void all_reduce(std::span<const CallDesc> calls, std::size_t block_bytes) {
  const CallDesc& call = calls.front();
  std::vector<const void*> inputs;
  for (const auto& c : calls) inputs.push_back(c.send);
  Bytes result(block_bytes);
  reduce_rank_order(inputs, result.data(), call.count, call.dtype, call.op);
  write_to_all(calls, result);
}

// Rank r receives the reduction of block r of every rank's send buffer.
void reduce_scatter(std::span<const CallDesc> calls, std::size_t block_bytes) {
  const CallDesc& call = calls.front();
  Bytes result(calls.size() * block_bytes);
  std::vector<const void*> inputs(calls.size());
  for (std::size_t b = 0; b < calls.size(); ++b) {
    for (std::size_t r = 0; r < calls.size(); ++r) inputs[r] = block(calls[r].send, b, block_bytes);
    reduce_rank_order(inputs, result.data() + b * block_bytes, call.count, call.dtype, call.op);
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

void broadcast(std::span<const CallDesc> calls, std::size_t block_bytes) {
  const CallDesc& root = calls[static_cast<std::size_t>(calls.front().root)];
  const auto* root_data = static_cast<const std::byte*>(root.send);
  write_to_all(calls, Bytes(root_data, root_data + block_bytes));
}

}  // namespace

void execute_collective(std::span<const CallDesc> calls) {
  const CallDesc& call = calls.front();
  const std::size_t block_bytes = call.count * dtype_bytes(call.dtype);
  switch (call.kind) {
    case CollectiveKind::AllReduce:
      return all_reduce(calls, block_bytes);
    case CollectiveKind::ReduceScatter:
      return reduce_scatter(calls, block_bytes);
    case CollectiveKind::AllGather:
      return all_gather(calls, block_bytes);
    case CollectiveKind::Broadcast:
      return broadcast(calls, block_bytes);
    case CollectiveKind::Barrier:
      return;
  }
}

}  // namespace zl
