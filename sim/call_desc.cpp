// call_desc.cpp — printing, checking and comparing collective call descriptors.
#include "call_desc.hpp"

#include <fmt/format.h>

#include "core/error.hpp"

namespace zl {

bool is_reduction(CollectiveKind kind) {
  return kind == CollectiveKind::AllReduce || kind == CollectiveKind::ReduceScatter;
}

std::string describe(const CallDesc& call) {
  const auto name = collective_name(call.kind);
  const auto dtype = dtype_name(call.dtype);
  switch (call.kind) {
    case CollectiveKind::AllReduce:
    case CollectiveKind::ReduceScatter:
      return fmt::format("{}({}, {} elems, {})", name, dtype, call.count, reduce_op_name(call.op));
    case CollectiveKind::AllGather:
    case CollectiveKind::AllToAll:
      return fmt::format("{}({}, {} elems)", name, dtype, call.count);
    case CollectiveKind::Broadcast:
      return fmt::format("{}({}, {} elems, root {})", name, dtype, call.count, call.root);
    case CollectiveKind::Barrier:
      break;
  }
  return std::string(name);
}

bool same_signature(const CallDesc& a, const CallDesc& b) {
  if (a.kind != b.kind) return false;
  if (a.kind == CollectiveKind::Barrier) return true;
  if (a.dtype != b.dtype || a.count != b.count) return false;
  if (is_reduction(a.kind) && a.op != b.op) return false;
  if (a.kind == CollectiveKind::Broadcast && a.root != b.root) return false;
  return true;
}

std::int64_t ring_buffer_elems(const CallDesc& call, int world) {
  const auto count = static_cast<std::int64_t>(call.count);
  switch (call.kind) {
    case CollectiveKind::ReduceScatter:
    case CollectiveKind::AllGather:
    case CollectiveKind::AllToAll:
      return count * world;
    case CollectiveKind::AllReduce:
    case CollectiveKind::Broadcast:
      return count;
    case CollectiveKind::Barrier:
      break;
  }
  return 0;
}

void check_call_arguments(const CallDesc& call, int world) {
  if (call.kind == CollectiveKind::Barrier) return;
  const auto name = collective_name(call.kind);
  ZL_CHECK(!is_reduction(call.kind) || (call.dtype != DType::I64 && call.dtype != DType::I8),
           "{} over {} is not supported: reduce fp32, bf16, fp16 or fp64", name,
           dtype_name(call.dtype));
  ZL_CHECK(call.count == 0 || (call.send != nullptr && call.recv != nullptr),
           "{} of {} elems got a null buffer: pass the buffers to communicate", name, call.count);
  ZL_CHECK(call.kind != CollectiveKind::Broadcast || (call.root >= 0 && call.root < world),
           "broadcast root {} is out of range for world size {}: use 0..{}", call.root, world,
           world - 1);
}

}  // namespace zl
