// nccl_comm.cpp — NcclComm: argument checks, then per collective: the comm stream waits for the
// compute stream (an event), NCCL runs on the comm stream, its traffic is recorded with the ring
// volume the sim records, and a handle carries the completion event back to the compute stream.
#include "comm/nccl/nccl_comm.hpp"

#include <cstdio>
#include <system_error>

#include "comm/traffic_ledger.hpp"
#include "core/error.hpp"
#include "ops/cuda/cuda_check.hpp"

namespace zl {

namespace {

void nccl_check(ncclResult_t status, const char* call) {
  if (status == ncclSuccess) return;
  fail("NCCL call {} failed: {}", call, ncclGetErrorString(status));
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

// The sim's and mpi's argument checks (check_call_arguments in sim/call_desc.cpp), with the same
// messages, without a CallDesc.
void check_reduction(CollectiveKind kind, DType dtype) {
  ZL_CHECK(dtype != DType::I64, "{} over {} is not supported: reduce fp32, bf16, fp16 or fp64",
           collective_name(kind), dtype_name(dtype));
}

void check_buffers(CollectiveKind kind, std::size_t count, const void* send, const void* recv) {
  ZL_CHECK(count == 0 || (send != nullptr && recv != nullptr),
           "{} of {} elems got a null buffer: pass the buffers to communicate",
           collective_name(kind), count);
}

}  // namespace

NcclComm::NcclComm(CudaDevice& device, const NcclBootstrap& bootstrap)
    : device_(device), rank_(bootstrap.rank.rank), world_(bootstrap.rank.world) {
  ZL_CUDA_CHECK(cudaSetDevice(device_.device_index()));
  ZL_CUDA_CHECK(cudaStreamCreate(&comm_stream_));
  ZL_CUDA_CHECK(cudaEventCreateWithFlags(&compute_ready_, cudaEventDisableTiming));
  barrier_word_ = device_.alloc(MemCategory::CommBuffer, DType::F32, {1});
  ZL_NCCL_CHECK(ncclCommInitRank(&comm_, world_, bootstrap.id, rank_));
  if (!bootstrap.id_file_to_remove.empty()) {
    std::error_code ignored;  // a file already gone is fine
    std::filesystem::remove(bootstrap.id_file_to_remove, ignored);
  }
}

NcclComm::~NcclComm() {
  // Destructors do not throw: NCCL and CUDA failures here can only be reported.
  cudaSetDevice(device_.device_index());
  cudaStreamSynchronize(comm_stream_);
  if (comm_ != nullptr) {
    const ncclResult_t status = ncclCommDestroy(comm_);
    if (status != ncclSuccess) {
      std::fprintf(stderr, "zerolab: ncclCommDestroy on rank %d failed: %s\n", rank_,
                   ncclGetErrorString(status));
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

CommHandle NcclComm::finish(CollectiveKind kind, std::int64_t buffer_elems, DType dtype, int root) {
  cudaEvent_t done = nullptr;
  ZL_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
  ZL_CUDA_CHECK(cudaEventRecord(done, comm_stream_));
  // The sim's record (sim/sim_comm.cpp): the ring volume of the whole buffer.
  const auto elem_bytes = static_cast<std::int64_t>(dtype_bytes(dtype));
  traffic_.record(kind, ring_volume(kind, buffer_elems, elem_bytes, rank_, world_, root));
  cudaStream_t compute = device_.stream();
  return CommHandle([done, compute] {
    // Later compute waits on the device; the host waits too, since callers may read results
    // through the host (and the handle's contract is "complete").
    const cudaError_t ordered = cudaStreamWaitEvent(compute, done, 0);
    const cudaError_t completed = cudaEventSynchronize(done);
    cudaEventDestroy(done);
    ZL_CUDA_CHECK(ordered);
    ZL_CUDA_CHECK(completed);
  });
}

CommHandle NcclComm::all_reduce_async(void* data, std::size_t count, DType dtype, ReduceOp op) {
  check_reduction(CollectiveKind::AllReduce, dtype);
  check_buffers(CollectiveKind::AllReduce, count, data, data);
  after_compute();
  ZL_NCCL_CHECK(
      ncclAllReduce(data, data, count, nccl_type(dtype), nccl_op(op), comm_, comm_stream_));
  return finish(CollectiveKind::AllReduce, static_cast<std::int64_t>(count), dtype, 0);
}

CommHandle NcclComm::reduce_scatter_async(const void* send, void* recv, std::size_t recv_count,
                                          DType dtype, ReduceOp op) {
  check_reduction(CollectiveKind::ReduceScatter, dtype);
  check_buffers(CollectiveKind::ReduceScatter, recv_count, send, recv);
  after_compute();
  ZL_NCCL_CHECK(ncclReduceScatter(send, recv, recv_count, nccl_type(dtype), nccl_op(op), comm_,
                                  comm_stream_));
  // The ring moves the whole input: world blocks of recv_count.
  return finish(CollectiveKind::ReduceScatter, static_cast<std::int64_t>(recv_count) * world_,
                dtype, 0);
}

CommHandle NcclComm::all_gather_async(const void* send, void* recv, std::size_t send_count,
                                      DType dtype) {
  check_buffers(CollectiveKind::AllGather, send_count, send, recv);
  after_compute();
  ZL_NCCL_CHECK(ncclAllGather(send, recv, send_count, nccl_type(dtype), comm_, comm_stream_));
  // The ring moves the whole output: world blocks of send_count.
  return finish(CollectiveKind::AllGather, static_cast<std::int64_t>(send_count) * world_, dtype,
                0);
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
  check_buffers(CollectiveKind::Broadcast, count, data, data);
  ZL_CHECK(root >= 0 && root < world_,
           "broadcast root {} is out of range for world size {}: use 0..{}", root, world_,
           world_ - 1);
  after_compute();
  ZL_NCCL_CHECK(ncclBroadcast(data, data, count, nccl_type(dtype), root, comm_, comm_stream_));
  finish(CollectiveKind::Broadcast, static_cast<std::int64_t>(count), dtype, root).wait();
}

void NcclComm::barrier() {
  after_compute();
  ZL_NCCL_CHECK(ncclAllReduce(barrier_word_.data(), barrier_word_.data(), 1, ncclFloat32, ncclSum,
                              comm_, comm_stream_));
  finish(CollectiveKind::Barrier, 0, DType::F32, 0).wait();
}

}  // namespace zl
