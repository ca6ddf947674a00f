// nccl_comm.cpp — NcclComm: the sim's argument checks, then per collective: the comm stream waits
// for the compute stream (an event), host buffers are copied into the staging buffer, NCCL runs on
// the comm stream (and staged results are copied back and waited for), its traffic is recorded
// with the ring volume the sim records, and a handle carries the completion event back to the
// compute stream. The host waits for a collective on device memory only where it waits for the
// compute stream anyway: the device's host wait guard watches every collective the stream waits on.
#include "comm/nccl/nccl_comm.hpp"

#include <cstddef>
#include <cstdio>
#include <system_error>

#include "call_signature.hpp"
#include "comm/nccl/nccl_library.hpp"
#include "comm/traffic_ledger.hpp"
#include "core/error.hpp"
#include "ops/cuda/cuda_check.hpp"

namespace zl {

namespace {

void nccl_check(ncclResult_t status, const char* call) {
  if (status == ncclSuccess) return;
  fail("NCCL call {} failed: {}", call, nccl().GetErrorString(status));
}

#define ZL_NCCL_CHECK(call) nccl_check((call), #call)

ncclDataType_t nccl_type(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return ncclFloat32;
    case DType::BF16:
      return ncclBfloat16;
    case DType::F16:
      return ncclFloat16;
    case DType::F64:
      return ncclFloat64;
    case DType::I64:
      return ncclInt64;
    case DType::I8:
      return ncclInt8;
  }
  fail("unknown dtype {}", static_cast<int>(dtype));
}

ncclRedOp_t nccl_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum:
      return ncclSum;
    case ReduceOp::Avg:
      return ncclAvg;
    case ReduceOp::Max:
      return ncclMax;
  }
  fail("unknown reduce op {}", static_cast<int>(op));
}

// True when NCCL can use `ptr` as it is: device or managed memory. Host memory (pageable,
// pinned or unknown to CUDA) gives false; a failed query's error is cleared.
bool nccl_can_use(const void* ptr) {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

// Offsets into the staging buffer keep NCCL's buffers aligned as cudaMalloc's are.
constexpr std::size_t kStagingAlignBytes = 256;

std::size_t align_up(std::size_t bytes) {
  return (bytes + kStagingAlignBytes - 1) / kStagingAlignBytes * kStagingAlignBytes;
}

}  // namespace

NcclComm::NcclComm(CudaDevice& device, const NcclBootstrap& bootstrap,
                   std::chrono::milliseconds timeout, int gpus_per_node)
    : device_(device),
      rank_(bootstrap.rank.rank),
      world_(bootstrap.rank.world),
      gpus_per_node_(gpus_per_node),
      timeout_(timeout) {
  ZL_CUDA_CHECK(cudaSetDevice(device_.device_index()));
  ZL_CUDA_CHECK(cudaStreamCreate(&comm_stream_));
  ZL_CUDA_CHECK(cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming));
  barrier_word_ = device_.alloc(MemCategory::CommBuffer, DType::F32, {1});
  check_calls_ = collective_checks_from_env();
  if (check_calls_) {
    check_words_ = device_.alloc(MemCategory::CommBuffer, DType::I64,
                                 {std::int64_t{kSignatureFields} * (world_ + 1)});
  }
  ZL_NCCL_CHECK(nccl().CommInitRank(&comm_, world_, bootstrap.id, rank_));
  if (!bootstrap.id_file_to_remove.empty()) {
    std::error_code ignored;  // a file already gone is fine
    std::filesystem::remove(bootstrap.id_file_to_remove, ignored);
  }
  // Collectives read and write the device's buffers on comm_stream_: a buffer freed while one is
  // queued is reused only after it. Before the host waits for the compute stream, it watches the
  // collectives the stream waits on.
  device_.set_host_wait_guard([this] { watch_pending(); });
  device_.add_side_stream(comm_stream_);
}

NcclComm::~NcclComm() {
  // Destructors do not throw: NCCL and CUDA failures here can only be reported.
  cudaSetDevice(device_.device_index());
  cudaStreamSynchronize(comm_stream_);
  device_.set_host_wait_guard({});
  for (const PendingCall& pending : pending_) cudaEventDestroy(pending.done);
  device_.remove_side_stream(comm_stream_);
  if (comm_ != nullptr && aborted_after_.empty()) {  // ncclCommAbort freed an aborted one
    const ncclResult_t status = nccl().CommDestroy(comm_);
    if (status != ncclSuccess) {
      std::fprintf(stderr, "zerolab: ncclCommDestroy on rank %d failed: %s\n", rank_,
                   nccl().GetErrorString(status));
    }
  }
  cudaEventDestroy(compute_ready_);
  cudaStreamDestroy(comm_stream_);
}

void NcclComm::after_compute() {
  ZL_CUDA_CHECK(cudaSetDevice(device_.device_index()));
  ZL_CUDA_CHECK(cudaEventRecord(compute_ready_, device_.stream()));
  ZL_CUDA_CHECK(cudaStreamWaitEvent(comm_stream_, compute_ready_, 0));
}

void NcclComm::check_not_aborted() const {
  ZL_CHECK(aborted_after_.empty(),
           "rank {}: the NCCL communicator was aborted ({}): the run cannot go on", rank_,
           aborted_after_);
}

std::int64_t NcclComm::next_call() {
  check_not_aborted();
  return ++calls_;
}

CommHandle NcclComm::finish(std::int64_t call_number, const CallDesc& call,
                            std::int64_t buffer_elems) {
  cudaEvent_t done = nullptr;
  ZL_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  ZL_CUDA_CHECK(cudaEventRecord(done, comm_stream_));
  // The sim's record (sim/sim_comm.cpp): the ring volume of the whole buffer.
  const auto elem_bytes = static_cast<std::int64_t>(dtype_bytes(call.dtype));
  const RingVolume volume =
      ring_volume(call.kind, buffer_elems, elem_bytes, rank_, world_, call.root);
  traffic().record(call.kind, volume);
  traffic().record_level(link_level_of(world_, node_count(world_, gpus_per_node_)),
                         volume.sent_bytes);
  reap_pending();
  return CommHandle([this, done, call_number, call] {
    // Later compute waits on the device. The host does not: it reads device results only through
    // the device, whose host waits watch this call first (watch_pending).
    pending_.push_back({done, call_number, call});
    ZL_CUDA_CHECK(cudaStreamWaitEvent(device_.stream(), done, 0));
  });
}

void NcclComm::watch_pending() {
  while (!pending_.empty()) {
    const PendingCall pending = pending_.front();
    pending_.pop_front();
    try {
      wait_for(pending.done, pending.call_number, pending.call);
    } catch (...) {
      cudaEventDestroy(pending.done);
      throw;
    }
    cudaEventDestroy(pending.done);
  }
}

void NcclComm::reap_pending() {
  while (!pending_.empty() && cudaEventQuery(pending_.front().done) == cudaSuccess) {
    cudaEventDestroy(pending_.front().done);
    pending_.pop_front();
  }
  (void)cudaGetLastError();  // a query that found a call still running is not an error
}

std::byte* NcclComm::host_staging(std::size_t bytes) {
  if (bytes > static_cast<std::size_t>(host_staging_.bytes())) {
    // Every staged call waited for the comm stream before returning: the old buffer is idle.
    const auto elems = static_cast<std::int64_t>((bytes + sizeof(double) - 1) / sizeof(double));
    host_staging_ = device_.alloc(MemCategory::CommBuffer, DType::F64, {elems});
  }
  return static_cast<std::byte*>(host_staging_.data());
}

CommHandle NcclComm::collective(const CallDesc& call) {
  check_call_arguments(call, world_);
  const std::int64_t call_number = next_call();
  if (check_calls_) agree(call_number, call);
  const std::size_t elem_bytes = dtype_bytes(call.dtype);
  const std::size_t send_bytes =
      call.count * elem_bytes * (call.kind == CollectiveKind::ReduceScatter ? world_ : 1);
  const std::size_t recv_bytes =
      call.count * elem_bytes * (call.kind == CollectiveKind::AllGather ? world_ : 1);
  const bool stage_send = call.count > 0 && !nccl_can_use(call.send);
  const bool stage_recv = call.count > 0 && !nccl_can_use(call.recv);
  // Allocated (and zeroed on the compute stream) before the comm stream waits for compute.
  std::byte* staging =
      stage_send || stage_recv ? host_staging(align_up(send_bytes) + recv_bytes) : nullptr;
  const void* send = stage_send ? staging : call.send;
  void* recv = stage_recv ? staging + align_up(send_bytes) : call.recv;
  after_compute();
  if (stage_send) {
    ZL_CUDA_CHECK(
        cudaMemcpyAsync(staging, call.send, send_bytes, cudaMemcpyHostToDevice, comm_stream_));
  }
  const ncclDataType_t type = nccl_type(call.dtype);
  switch (call.kind) {
    case CollectiveKind::AllReduce:
      ZL_NCCL_CHECK(
          nccl().AllReduce(send, recv, call.count, type, nccl_op(call.op), comm_, comm_stream_));
      break;
    case CollectiveKind::ReduceScatter:
      ZL_NCCL_CHECK(nccl().ReduceScatter(send, recv, call.count, type, nccl_op(call.op), comm_,
                                         comm_stream_));
      break;
    case CollectiveKind::AllGather:
      ZL_NCCL_CHECK(nccl().AllGather(send, recv, call.count, type, comm_, comm_stream_));
      break;
    case CollectiveKind::Broadcast:
      ZL_NCCL_CHECK(nccl().Broadcast(send, recv, call.count, type, call.root, comm_, comm_stream_));
      break;
    case CollectiveKind::Barrier:
      fail("NcclComm::collective got a barrier: call barrier()");
    case CollectiveKind::AllToAll:
      fail("NcclComm has no all_to_all: use --backend sim");
  }
  if (stage_recv) {
    ZL_CUDA_CHECK(
        cudaMemcpyAsync(call.recv, recv, recv_bytes, cudaMemcpyDeviceToHost, comm_stream_));
  }
  // Staged host buffers are complete on return, and the staging buffer is free for the next call.
  if (stage_send || stage_recv) wait_for_comm_stream(call_number, call);
  return finish(call_number, call, ring_buffer_elems(call, world_));
}

CommHandle NcclComm::all_reduce_async(void* data, std::size_t count, DType dtype, ReduceOp op) {
  return collective({.kind = CollectiveKind::AllReduce,
                     .op = op,
                     .dtype = dtype,
                     .count = count,
                     .send = data,
                     .recv = data});
}

CommHandle NcclComm::reduce_scatter_async(const void* send, void* recv, std::size_t recv_count,
                                          DType dtype, ReduceOp op) {
  return collective({.kind = CollectiveKind::ReduceScatter,
                     .op = op,
                     .dtype = dtype,
                     .count = recv_count,
                     .send = send,
                     .recv = recv});
}

CommHandle NcclComm::all_gather_async(const void* send, void* recv, std::size_t send_count,
                                      DType dtype) {
  return collective({.kind = CollectiveKind::AllGather,
                     .dtype = dtype,
                     .count = send_count,
                     .send = send,
                     .recv = recv});
}

void NcclComm::all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op) {
  all_reduce_async(data, count, dtype, op).wait();
}

void NcclComm::reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                              ReduceOp op) {
  reduce_scatter_async(send, recv, recv_count, dtype, op).wait();
}

void NcclComm::all_gather(const void* send, void* recv, std::size_t send_count, DType dtype) {
  all_gather_async(send, recv, send_count, dtype).wait();
}

void NcclComm::broadcast(void* data, std::size_t count, DType dtype, int root) {
  collective({.kind = CollectiveKind::Broadcast,
              .dtype = dtype,
              .count = count,
              .root = root,
              .send = data,
              .recv = data})
      .wait();
}

void NcclComm::barrier() {
  const CallDesc call{.kind = CollectiveKind::Barrier};
  const std::int64_t call_number = next_call();
  if (check_calls_) agree(call_number, call);
  after_compute();
  ZL_NCCL_CHECK(nccl().AllReduce(barrier_word_.data(), barrier_word_.data(), 1, ncclFloat32,
                                 ncclSum, comm_, comm_stream_));
  finish(call_number, call, 0).wait();
  watch_pending();  // a barrier holds the host until every rank reached it
}

}  // namespace zl
