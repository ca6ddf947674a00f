// nccl_watchdog.cpp — NcclComm's host waits under the watchdog (comm/watchdog.hpp), as PyTorch's
// ProcessGroupNCCL guards its work: the poll asks cudaEventQuery whether the call's event has
// fired and ncclCommGetAsyncError whether NCCL failed meanwhile (a peer gone, a network error);
// the abort is ncclCommAbort, which ends the communicator's kernels so no rank hangs in a
// collective its peers never join. Past the collective timeout the message has the sim's shape.
#include <cuda_runtime_api.h>
#include <fmt/format.h>

#include <cstdio>

#include "comm/nccl/nccl_comm.hpp"
#include "comm/nccl/nccl_library.hpp"
#include "comm/watchdog.hpp"
#include "core/error.hpp"
#include "ops/cuda/cuda_check.hpp"

namespace zl {

namespace {

// Whether `event` has fired, else whether `comm` holds an asynchronous error.
CollectivePoll poll_nccl_call(cudaEvent_t event, ncclComm_t comm) {
  const cudaError_t state = cudaEventQuery(event);
  if (state == cudaSuccess) return {PollState::Done};
  if (state != cudaErrorNotReady) {
    return {PollState::Failed, fmt::format("CUDA reported {}", cudaGetErrorString(state))};
  }
  ncclResult_t async = ncclSuccess;
  const ncclResult_t asked = nccl().CommGetAsyncError(comm, &async);
  if (asked != ncclSuccess) {
    return {PollState::Failed,
            fmt::format("ncclCommGetAsyncError failed: {}", nccl().GetErrorString(asked))};
  }
  if (async != ncclSuccess && async != ncclInProgress) {
    return {PollState::Failed,
            fmt::format("NCCL reported an asynchronous error: {}", nccl().GetErrorString(async))};
  }
  return {PollState::Pending};
}

}  // namespace

void NcclComm::wait_for(cudaEvent_t event, std::int64_t call_number, const CallDesc& call) {
  check_not_aborted();  // an aborted communicator is freed: nothing may poll it
  ZL_CUDA_CHECK(cudaSetDevice(device_.device_index()));
  const WatchedCall watched{.rank = rank_,
                            .call = fmt::format("call #{} {}", call_number, describe(call)),
                            .timeout = timeout_};
  const auto abort = [this, &watched] {
    const ncclResult_t status = nccl().CommAbort(comm_);
    if (status != ncclSuccess) {
      std::fprintf(stderr, "zerolab: ncclCommAbort on rank %d failed: %s\n", rank_,
                   nccl().GetErrorString(status));
    }
    aborted_after_ = fmt::format("rank {} gave up in {}", rank_, watched.call);
  };
  watch_collective([this, event] { return poll_nccl_call(event, comm_); }, abort, watched);
}

void NcclComm::wait_for_comm_stream(std::int64_t call_number, const CallDesc& call) {
  cudaEvent_t queued = nullptr;
  ZL_CUDA_CHECK(cudaEventCreateWithFlags(&queued, cudaEventDisableTiming));
  const cudaError_t recorded = cudaEventRecord(queued, comm_stream_);
  try {
    ZL_CUDA_CHECK(recorded);
    wait_for(queued, call_number, call);
  } catch (...) {
    cudaEventDestroy(queued);
    throw;
  }
  cudaEventDestroy(queued);
}

}  // namespace zl
