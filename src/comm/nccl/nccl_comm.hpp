// nccl_comm.hpp — the NCCL backend: one process per GPU, collectives on a dedicated comm stream,
// ordered after the compute stream's work by an event and before later compute by another, so
// communication overlaps the kernels queued meanwhile. Traffic is recorded as the sim records it
// (ring volumes, comm/traffic_ledger.hpp). NCCL's reduction order is its own, so results are
// close to, not bitwise equal to, the sim's rank-order sums.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>

#include "comm/comm.hpp"
#include "comm/nccl/nccl_bootstrap.hpp"
#include "ops/cuda/cuda_device.hpp"

namespace zl {

/// One rank's NCCL communicator, on the GPU of its CudaDevice. Buffers are device memory of that
/// GPU. Blocking calls return when the result is in device memory (the host waits for the comm
/// stream); async calls return a handle whose wait() orders the compute stream after the
/// collective and then waits for it on the host. ReduceOp::Max is ncclMax, which NCCL does not
/// promise to propagate NaN through (the sim does). Not thread-safe: one NcclComm per process.
class NcclComm final : public Comm {
 public:
  /// Joins the group `bootstrap` describes (ncclCommInitRank: blocks until every rank has
  /// joined), on `device`'s GPU, and removes rank 0's id file once all have joined. `device`
  /// must outlive this communicator.
  NcclComm(CudaDevice& device, const NcclBootstrap& bootstrap);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return rank_; }
  int size() const override { return world_; }

  void all_reduce(void* data, std::size_t count, DType dtype, ReduceOp op) override;
  void reduce_scatter(const void* send, void* recv, std::size_t recv_count, DType dtype,
                      ReduceOp op) override;
  void all_gather(const void* send, void* recv, std::size_t send_count, DType dtype) override;
  void broadcast(void* data, std::size_t count, DType dtype, int root) override;
  /// An all_reduce of one float on the comm stream, waited for on the host.
  void barrier() override;

  CommHandle all_reduce_async(void* data, std::size_t count, DType dtype, ReduceOp op) override;
  CommHandle reduce_scatter_async(const void* send, void* recv, std::size_t recv_count, DType dtype,
                                  ReduceOp op) override;
  CommHandle all_gather_async(const void* send, void* recv, std::size_t send_count,
                              DType dtype) override;

  /// The stream the collectives run on.
  cudaStream_t comm_stream() const { return comm_stream_; }

 private:
  // Orders the comm stream after the compute stream's queued work.
  void after_compute();
  // Records the collective's traffic and returns the handle that orders compute after it.
  CommHandle finish(CollectiveKind kind, std::int64_t buffer_elems, DType dtype, int root);

  CudaDevice& device_;
  int rank_ = 0;
  int world_ = 1;
  ncclComm_t comm_ = nullptr;
  cudaStream_t comm_stream_ = nullptr;
  cudaEvent_t compute_ready_ = nullptr;  // re-recorded before every collective
  Buffer barrier_word_;                  // one float of device memory for barrier() (CommBuffer)
};

}  // namespace zl
