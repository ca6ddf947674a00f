// cuda_device_memory.cpp — CudaDevice's memory: cudaMalloc'd buffers kept in a cache by size (as
// PyTorch's caching allocator does) and reused in stream order, the device's scratch, and the
// ledger check against cudaMemGetInfo, and the pinned staging slots host uploads go through.
//
// Stream order: every kernel, copy and memset of the device runs on its one compute stream, so a
// block freed now and handed out again later is only touched by work queued after everything
// that used it: freeing needs no wait. Work on side streams (NcclComm's communication stream,
// registered with add_side_stream) is not ordered with the compute stream, so a free records an
// event on each side stream and the reuse makes the compute stream wait for those events; a side
// stream that later uses the block first waits for the compute stream (NcclComm::after_compute).
// Only cudaFree, when the cache goes back to the driver, waits for the whole device.
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "core/error.hpp"
#include "core/steady_ms.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_device.hpp"

namespace zl {

void CudaDevice::upload_staged(void* device, const void* host, std::size_t bytes) {
  StagingSlot& slot = staging_[next_staging_];
  next_staging_ = (next_staging_ + 1) % kStagingSlots;
  if (slot.done == nullptr) {
    ZL_CUDA_CHECK(cudaEventCreateWithFlags(&slot.done, cudaEventDisableTiming));
  } else if (const cudaError_t queued = cudaEventQuery(slot.done); queued == cudaErrorNotReady) {
    if (host_wait_guard_) host_wait_guard_();
    // every slot's upload is still queued: wait for this one's
    const double started_ms = steady_ms();
    ZL_CUDA_CHECK(cudaEventSynchronize(slot.done));
    count_host_wait(steady_ms() - started_ms);
  } else {
    ZL_CUDA_CHECK(queued);
  }
  if (slot.bytes < bytes) {
    if (slot.host != nullptr) ZL_CUDA_CHECK(cudaFreeHost(slot.host));
    slot.host = nullptr;
    slot.bytes = 0;
    ZL_CUDA_CHECK(cudaMallocHost(&slot.host, bytes));
    slot.bytes = bytes;
  }
  std::memcpy(slot.host, host, bytes);
  ZL_CUDA_CHECK(cudaMemcpyAsync(device, slot.host, bytes, cudaMemcpyHostToDevice, stream_));
  ZL_CUDA_CHECK(cudaEventRecord(slot.done, stream_));
}

void CudaDevice::destroy_staging() {
  for (StagingSlot& slot : staging_) {
    if (slot.done != nullptr) cudaEventSynchronize(slot.done);
    if (slot.done != nullptr) cudaEventDestroy(slot.done);
    if (slot.host != nullptr) cudaFreeHost(slot.host);
  }
}

std::int64_t CudaDevice::driver_used_bytes() {
  std::size_t free_bytes = 0, total_bytes = 0;
  ZL_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return static_cast<std::int64_t>(total_bytes - free_bytes);
}

void* CudaDevice::allocate(std::size_t bytes) {
  void* ptr = allocate_unset(bytes);
  ZL_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, stream_));
  return ptr;
}

void* CudaDevice::allocate_unset(std::size_t bytes) {
  select();
  void* ptr = nullptr;
  if (const auto cached = cache_.find(bytes); cached != cache_.end()) {
    ptr = cached->second.ptr;
    const std::vector<cudaEvent_t> side_work = std::move(cached->second.side_work);
    cache_.erase(cached);
    for (const cudaEvent_t event : side_work) {
      const cudaError_t ordered = cudaStreamWaitEvent(stream_, event, 0);
      cudaEventDestroy(event);
      ZL_CUDA_CHECK(ordered);
    }
  } else if (cudaMalloc(&ptr, bytes) != cudaSuccess) {
    (void)cudaGetLastError();  // the failed cudaMalloc's error is not sticky; clear it anyway
    release_cache();
    ZL_CUDA_CHECK(cudaMalloc(&ptr, bytes));
  }
  ++live_allocations_;
  return ptr;
}

void CudaDevice::deallocate(void* ptr, std::size_t bytes) {
  cudaSetDevice(device_index_);
  --live_allocations_;
  CachedBlock block{.ptr = ptr, .side_work = {}};
  for (const cudaStream_t side : side_streams_) {
    cudaEvent_t event = nullptr;
    cudaError_t status = cudaEventCreateWithFlags(&event, cudaEventDisableTiming);
    if (status == cudaSuccess) status = cudaEventRecord(event, side);
    if (status != cudaSuccess) {
      // Without the event, the block is safe to reuse only once the whole device is idle.
      std::fprintf(stderr, "zerolab: CUDA device %d could not order the free of %zu bytes: %s\n",
                   device_index_, bytes, cudaGetErrorString(status));
      if (event != nullptr) cudaEventDestroy(event);
      for (const cudaEvent_t recorded : block.side_work) cudaEventDestroy(recorded);
      cudaFree(ptr);  // waits for the device
      return;
    }
    block.side_work.push_back(event);
  }
  cache_.emplace(bytes, std::move(block));
}

void CudaDevice::add_side_stream(cudaStream_t stream) {
  side_streams_.push_back(stream);
}

void CudaDevice::remove_side_stream(cudaStream_t stream) {
  std::erase(side_streams_, stream);
}

void CudaDevice::free_cache_unchecked() {
  for (const auto& [bytes, block] : cache_) {
    for (const cudaEvent_t event : block.side_work) cudaEventDestroy(event);
    cudaFree(block.ptr);
  }
  cache_.clear();
}

void CudaDevice::release_cache() {
  select();
  wait_on_host();
  ZL_CUDA_CHECK(cudaDeviceSynchronize());
  free_cache_unchecked();
  ZL_CUDA_CHECK(cudaGetLastError());
}

std::int64_t CudaDevice::cached_bytes() const {
  std::int64_t bytes = 0;
  for (const auto& [block_bytes, block] : cache_) bytes += static_cast<std::int64_t>(block_bytes);
  return bytes;
}

DeviceMemoryCheck CudaDevice::memory_check() {
  synchronize();
  DeviceMemoryCheck check;
  check.ledger_bytes = ledger().total_current_bytes();
  check.internal_bytes =
      static_cast<std::int64_t>(cublas_workspace_bytes_ + scratch_bytes_ + sums_scratch_bytes_ +
                                kColumnCounterBytes + kCheckSlots * sizeof(unsigned long long)) +
      cached_bytes() + typed_scratch_bytes();
  check.allocations = live_allocations_ + static_cast<std::int64_t>(cache_.size()) + 3 +
                      (scratch_ != nullptr ? 1 : 0) + (sums_scratch_ != nullptr ? 1 : 0);
  check.driver_used_bytes = driver_used_bytes() - baseline_used_bytes_;
  return check;
}

void CudaDevice::check_memory_ledger() {
  const DeviceMemoryCheck check = memory_check();
  ZL_CHECK(check.consistent(),
           "CUDA device {}: the memory ledger books {} bytes and the device's scratch {} bytes in "
           "{} allocations, but cudaMemGetInfo counts {} bytes taken since the device was made: "
           "something allocates outside the ledger (or another process shares the GPU)",
           device_index_, check.ledger_bytes, check.internal_bytes, check.allocations,
           check.driver_used_bytes);
}

void* CudaDevice::scratch(std::size_t bytes) {
  return grown(scratch_, scratch_bytes_, bytes);
}

void* CudaDevice::sums_scratch(std::size_t bytes) {
  return grown(sums_scratch_, sums_scratch_bytes_, bytes);
}

void* CudaDevice::grown(void*& buffer, std::size_t& buffer_bytes, std::size_t bytes) {
  if (bytes <= buffer_bytes) return buffer;
  select();
  if (buffer != nullptr) {
    wait_on_host();  // earlier kernels may still read it
    ZL_CUDA_CHECK(cudaFree(buffer));
    buffer = nullptr;
    buffer_bytes = 0;
  }
  ZL_CUDA_CHECK(cudaMalloc(&buffer, bytes));
  buffer_bytes = bytes;
  return buffer;
}

}  // namespace zl
