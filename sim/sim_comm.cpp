// sim_comm.cpp — SimComm: argument checks, then post, wait and record the ring volume.
#include "sim_comm.hpp"

#include "comm/traffic_ledger.hpp"
#include "core/error.hpp"

namespace zl {

namespace {

// Argument errors are this rank's own, so they are thrown before the call is posted.
void check_arguments(const CallDesc& call, int world) {
  if (call.kind == CollectiveKind::Barrier) return;
  const auto name = collective_name(call.kind);
  ZL_CHECK(!is_reduction(call.kind) || call.dtype != DType::I64,
           "{} over {} is not supported: reduce fp32, bf16, fp16 or fp64", name,
           dtype_name(call.dtype));
  ZL_CHECK(call.count == 0 || (call.send != nullptr && call.recv != nullptr),
           "{} of {} elems got a null buffer: pass the buffers to communicate", name, call.count);
  ZL_CHECK(call.kind != CollectiveKind::Broadcast || (call.root >= 0 && call.root < world),
           "broadcast root {} is out of range for world size {}: use 0..{}", call.root, world,
           world - 1);
}

}  // namespace

SimComm::SimComm(int rank, int world, Rendezvous& rendezvous)
    : rank_(rank), world_(world), rendezvous_(rendezvous) {}

void SimComm::all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op) {
  run_blocking({.kind = CollectiveKind::AllReduce,
                .op = op,
                .dtype = dtype,
                .count = count,
                .send = data,
                .recv = data});
}

void SimComm::reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                             ReduceOp op) {
  run_blocking({.kind = CollectiveKind::ReduceScatter,
                .op = op,
                .dtype = dtype,
                .count = recv_count,
                .send = send,
                .recv = recv});
}

void SimComm::all_gather(const void* send, void* recv, std::size_t send_count, DType dtype) {
  run_blocking({.kind = CollectiveKind::AllGather,
                .dtype = dtype,
                .count = send_count,
                .send = send,
                .recv = recv});
}

void SimComm::broadcast(void* data, std::size_t count, DType dtype, int root) {
  run_blocking({.kind = CollectiveKind::Broadcast,
                .dtype = dtype,
                .count = count,
                .root = root,
                .send = data,
                .recv = data});
}

void SimComm::barrier() {
  run_blocking({.kind = CollectiveKind::Barrier});
}

void SimComm::run_blocking(const CallDesc& call) {
  check_arguments(call, world_);
  rendezvous_.wait(rank_, rendezvous_.post(rank_, call));
  const auto elem_bytes = static_cast<std::int64_t>(dtype_bytes(call.dtype));
  traffic_.record(call.kind, ring_volume(call.kind, ring_buffer_elems(call, world_), elem_bytes,
                                         rank_, world_, call.root));
}

}  // namespace zl
