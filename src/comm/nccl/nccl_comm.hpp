// nccl_comm.hpp — the NCCL backend: one process per GPU, collectives on a dedicated comm stream,
// ordered after the compute stream's work by an event and before later compute by another, so
// communication overlaps the kernels queued meanwhile. Traffic is recorded as the sim records it
// (ring volumes, comm/traffic_ledger.hpp). NCCL's reduction order is its own, so results are
// close to, not bitwise equal to, the sim's rank-order sums. Small collectives on host memory (the
// engines' logged loss) are staged through a device buffer of the comm.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <filesystem>
#include <string>

#include "call_desc.hpp"
#include "comm/collective_checks.hpp"
#include "comm/comm.hpp"
#include "comm/nccl/nccl_bootstrap.hpp"
#include "ops/cuda/cuda_device.hpp"

namespace zl {

/// One rank's NCCL communicator, on the GPU of its CudaDevice. Buffers are device memory of that
/// GPU (or managed memory), or host memory: NCCL reads and writes only device memory, so a host
/// buffer (cudaPointerGetAttributes says neither device nor managed) is copied into a staging
/// buffer of the comm on the comm stream, the collective runs there and the result is copied
/// back; such a call, async or not, is complete on return. The staging buffer grows to the
/// largest staged call and is booked as CommBuffer in the device's ledger: it is meant for the
/// engines' small host collectives (the loss), not for tensors.
/// A call on device memory returns once it is queued (a blocking call as if its handle were
/// waited): wait() orders the compute stream after the collective, and the host does not wait
/// for it. The host waits only where it reads, through the device: the device's host waits
/// (CudaDevice::set_host_wait_guard) first watch every collective the compute stream waits on,
/// and barrier() holds the host until every rank reached it. ReduceOp::Max is ncclMax, which NCCL
/// does not promise to propagate NaN through (the sim does). Arguments are checked as the sim checks them
/// (check_call_arguments, sim/call_desc.hpp). With ZL_COLLECTIVE_CHECKS=1 every call, barrier
/// included, is first compared across the ranks (nccl_agree.cpp); a mismatch is the sim's error.
/// Every host wait is guarded by the watchdog (comm/watchdog.hpp, nccl_watchdog.cpp): it polls the
/// call's event and ncclCommGetAsyncError, and at an asynchronous error or past the collective
/// timeout calls ncclCommAbort and throws the sim's timeout message; every later call then fails
/// at once. Not thread-safe: one NcclComm per process.
class NcclComm final : public Comm {
 public:
  /// Joins the group `bootstrap` describes (ncclCommInitRank: blocks until every rank has
  /// joined), on `device`'s GPU, and removes rank 0's id file once all have joined. `device`
  /// must outlive this communicator. No wait for a collective lasts longer than `timeout`.
  NcclComm(CudaDevice& device, const NcclBootstrap& bootstrap,
           std::chrono::milliseconds timeout = std::chrono::seconds(120),
           int gpus_per_node = kOneNode);
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
  // Checks `call`, stages host buffers, queues the collective on the comm stream and records it.
  CommHandle collective(const CallDesc& call);
  // At least `bytes` of device memory for staging host buffers (host_staging_, grown on demand).
  std::byte* host_staging(std::size_t bytes);
  // Under ZL_COLLECTIVE_CHECKS: the ranks compare `call`, number `call_number`, before its data
  // moves (nccl_agree.cpp).
  void agree(std::int64_t call_number, const CallDesc& call);
  // Orders the comm stream after the compute stream's queued work.
  void after_compute();
  // Throws once the watchdog has aborted the communicator: nothing may use it afterwards.
  void check_not_aborted() const;
  // Counts a call and fails if the communicator was aborted; returns the call's number.
  std::int64_t next_call();
  // Waits on the host for `event`, part of call `call_number` (`call`), under the watchdog: at an
  // error or past the timeout, aborts the communicator and throws (nccl_watchdog.cpp).
  void wait_for(cudaEvent_t event, std::int64_t call_number, const CallDesc& call);
  // wait_for() on everything queued on the comm stream so far.
  void wait_for_comm_stream(std::int64_t call_number, const CallDesc& call);
  // Records the collective's traffic and returns the handle that orders compute after it.
  CommHandle finish(std::int64_t call_number, const CallDesc& call, std::int64_t buffer_elems);
  // wait_for() on every call the compute stream waits on (pending_), oldest first: the device's
  // host wait guard, so no host wait outlasts the collective timeout.
  void watch_pending();
  // Forgets the pending calls already complete (their events destroyed).
  void reap_pending();

  // A waited handle's call: the compute stream waits on `done`, the host has not seen it yet.
  struct PendingCall {
    cudaEvent_t done;
    std::int64_t call_number;
    CallDesc call;
  };

  CudaDevice& device_;
  int rank_ = 0;
  int world_ = 1;
  int gpus_per_node_ = kOneNode;  // the ledger's link levels (TrafficLedger::record_level)
  ncclComm_t comm_ = nullptr;
  cudaStream_t comm_stream_ = nullptr;
  cudaEvent_t compute_ready_ = nullptr;  // re-recorded before every collective
  Buffer barrier_word_;                  // one float of device memory for barrier() (CommBuffer)
  Buffer host_staging_;                  // device copies of host buffers (CommBuffer, fp64 elems)
  bool check_calls_ = false;             // ZL_COLLECTIVE_CHECKS=1
  std::int64_t calls_ = 0;               // calls made, barriers included, as the sim numbers them
  std::chrono::milliseconds timeout_;    // the longest host wait for one call
  std::string aborted_after_;            // the watchdog's message once it aborted comm_
  Buffer check_words_;  // agree()'s signatures (CommBuffer, int64), allocated with checks only
  std::deque<PendingCall> pending_;  // watch_pending's calls, oldest first
};

}  // namespace zl
