// nccl_agree.cpp — NcclComm's debug check of every call, switched on by ZL_COLLECTIVE_CHECKS=1 (as
// TORCH_DISTRIBUTED_DEBUG=DETAIL is for PyTorch): before the data moves, the ranks max-reduce the
// call's signature bounds (call_signature.hpp, as MpiComm does on every call) in one small
// ncclAllReduce that the host waits for, so ranks on different code paths fail with the sim's
// "collective mismatch at call #N" instead of hanging inside NCCL. A round trip per call is what a
// step must not pay by default, hence the switch.
#include <cuda_runtime_api.h>

#include <vector>

#include "call_signature.hpp"
#include "comm/nccl/nccl_comm.hpp"
#include "comm/nccl/nccl_library.hpp"
#include "core/error.hpp"
#include "ops/cuda/cuda_check.hpp"

namespace zl {

namespace {

void check_nccl(ncclResult_t status, const char* call) {
  ZL_CHECK(status == ncclSuccess, "NCCL call {} failed: {}", call, nccl().GetErrorString(status));
}

}  // namespace

void NcclComm::agree(std::int64_t call_number, const CallDesc& call) {
  const CallSignature own = call_signature(call);
  SignatureBounds bounds = signature_bounds(own);
  // check_words_: [0, kSignatureFields) this rank's signature, then every rank's; the bounds
  // reuse its first 2 * kSignatureFields words.
  auto* words = static_cast<std::int64_t*>(check_words_.data());
  const std::size_t bounds_bytes = sizeof(bounds);
  ZL_CUDA_CHECK(cudaSetDevice(device_.device_index()));
  ZL_CUDA_CHECK(
      cudaMemcpyAsync(words, bounds.data(), bounds_bytes, cudaMemcpyHostToDevice, comm_stream_));
  check_nccl(nccl().AllReduce(words, words, bounds.size(), ncclInt64, ncclMax, comm_, comm_stream_),
             "ncclAllReduce (ZL_COLLECTIVE_CHECKS)");
  ZL_CUDA_CHECK(
      cudaMemcpyAsync(bounds.data(), words, bounds_bytes, cudaMemcpyDeviceToHost, comm_stream_));
  wait_for_comm_stream(call_number, call);
  if (signatures_agree(bounds)) return;
  // Every rank saw the same bounds, so every rank is here: gather who called what.
  std::vector<CallSignature> all(static_cast<std::size_t>(world_));
  ZL_CUDA_CHECK(
      cudaMemcpyAsync(words, own.data(), sizeof(own), cudaMemcpyHostToDevice, comm_stream_));
  check_nccl(nccl().AllGather(words, words + kSignatureFields, kSignatureFields, ncclInt64, comm_,
                              comm_stream_),
             "ncclAllGather (ZL_COLLECTIVE_CHECKS)");
  ZL_CUDA_CHECK(cudaMemcpyAsync(all.data(), words + kSignatureFields, sizeof(own) * all.size(),
                                cudaMemcpyDeviceToHost, comm_stream_));
  wait_for_comm_stream(call_number, call);
  fail("{}", signature_mismatch(call_number, all));
}

}  // namespace zl
