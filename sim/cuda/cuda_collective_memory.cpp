// cuda_collective_memory.cpp — the simulator's collectives on GPU buffers: wait for the GPU, stage
// the result in one device scratch buffer (reduce_rank_order_cuda for reductions, copies for the
// rest), copy it out to every rank, wait again. execute.cpp's staged path, on the device.
#include "cuda_collective_memory.hpp"

#include <vector>

#include "core/error.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/reduce_cuda.hpp"

namespace zl {

namespace {

// The GPU holding device pointer `ptr`.
int device_of(const void* ptr) {
  cudaPointerAttributes attributes{};
  ZL_CUDA_CHECK(cudaPointerGetAttributes(&attributes, ptr));
  return attributes.device;
}

// Restores the calling thread's current device when it goes out of scope: execute runs on some
// rank's thread, whose own CudaDevice selects its GPU on every call anyway.
class CurrentDeviceGuard {
 public:
  CurrentDeviceGuard() { ZL_CUDA_CHECK(cudaGetDevice(&saved_)); }
  ~CurrentDeviceGuard() { cudaSetDevice(saved_); }
  CurrentDeviceGuard(const CurrentDeviceGuard&) = delete;
  CurrentDeviceGuard& operator=(const CurrentDeviceGuard&) = delete;

 private:
  int saved_ = 0;
};

const std::byte* block(const void* base, std::size_t index, std::size_t block_bytes) {
  return static_cast<const std::byte*>(base) + index * block_bytes;
}

std::byte* block(void* base, std::size_t index, std::size_t block_bytes) {
  return static_cast<std::byte*>(base) + index * block_bytes;
}

}  // namespace

CudaCollectiveMemory::~CudaCollectiveMemory() {
  if (device_ < 0) return;
  cudaSetDevice(device_);
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
  (void)cudaGetLastError();
}

bool CudaCollectiveMemory::holds(const void* ptr) const {
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, ptr) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver, no GPU or a pointer CUDA does not know: host memory
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice;
}

void CudaCollectiveMemory::use_device(int device) {
  if (device == device_) return;
  if (device_ >= 0) {  // a collective on another GPU than the last one: start afresh there
    ZL_CUDA_CHECK(cudaSetDevice(device_));
    if (scratch_ != nullptr) ZL_CUDA_CHECK(cudaFree(scratch_));
    if (stream_ != nullptr) ZL_CUDA_CHECK(cudaStreamDestroy(stream_));
    scratch_ = nullptr;
    scratch_bytes_ = 0;
    stream_ = nullptr;
    device_ = -1;
  }
  ZL_CUDA_CHECK(cudaSetDevice(device));
  ZL_CUDA_CHECK(cudaStreamCreate(&stream_));
  device_ = device;
}

void* CudaCollectiveMemory::scratch(std::size_t bytes) {
  if (bytes <= scratch_bytes_) return scratch_;
  // Every earlier collective waited for stream_ before returning: the old scratch is unused.
  if (scratch_ != nullptr) ZL_CUDA_CHECK(cudaFree(scratch_));
  scratch_ = nullptr;
  scratch_bytes_ = 0;
  ZL_CUDA_CHECK(cudaMalloc(&scratch_, bytes));
  scratch_bytes_ = bytes;
  return scratch_;
}

void CudaCollectiveMemory::copy(void* to, const void* from, std::size_t bytes) {
  if (bytes == 0 || to == from) return;
  ZL_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaCollectiveMemory::execute(std::span<const CallDesc> calls) {
  if (calls.empty()) return;
  const CallDesc& call = calls.front();
  if (call.kind == CollectiveKind::Barrier) return;
  // Every buffer on one GPU (an empty call may pass null buffers: those are skipped).
  int device = -1;
  std::size_t device_rank = 0;
  for (std::size_t r = 0; r < calls.size(); ++r) {
    for (const void* ptr : {calls[r].send, static_cast<const void*>(calls[r].recv)}) {
      if (ptr == nullptr) continue;
      const int ptr_device = device_of(ptr);
      if (device < 0) {
        device = ptr_device;
        device_rank = r;
      }
      ZL_CHECK(ptr_device == device,
               "{}: rank {} passed a buffer on GPU {} but rank {} one on GPU {}: the simulator's "
               "ranks must share one GPU",
               describe(calls[r]), r, ptr_device, device_rank, device);
    }
  }
  if (device < 0) return;  // no buffers: nothing to move
  std::lock_guard lock(mutex_);
  CurrentDeviceGuard restore;
  use_device(device);
  // The ranks' streams may still be writing their send buffers (and reading their recv buffers).
  ZL_CUDA_CHECK(cudaDeviceSynchronize());
  run(calls);
  ZL_CUDA_CHECK(cudaStreamSynchronize(stream_));
}

void CudaCollectiveMemory::run(std::span<const CallDesc> calls) {
  const CallDesc& call = calls.front();
  const std::size_t world = calls.size();
  const std::size_t block_bytes = call.count * dtype_bytes(call.dtype);
  std::vector<const void*> inputs(world);
  ZL_CHECK(
      !is_reduction(call.kind) || call.gpus_per_node <= 1 ||
          static_cast<std::size_t>(call.gpus_per_node) >= world,
      "the simulator's GPU collectives sum in one level only, but {} GPUs a node split a world "
      "of {}: simulate nodes with --accelerator cpu",
      call.gpus_per_node, world);
  switch (call.kind) {
    case CollectiveKind::AllReduce: {
      for (std::size_t r = 0; r < world; ++r) inputs[r] = calls[r].send;
      void* result = scratch(block_bytes);
      reduce_rank_order_cuda(inputs, result, call.count, call.dtype, call.op, stream_);
      for (const CallDesc& c : calls) copy(c.recv, result, block_bytes);
      return;
    }
    case CollectiveKind::ReduceScatter: {  // rank r receives the reduction of everyone's block r
      void* result = scratch(world * block_bytes);
      for (std::size_t b = 0; b < world; ++b) {
        for (std::size_t r = 0; r < world; ++r) inputs[r] = block(calls[r].send, b, block_bytes);
        reduce_rank_order_cuda(inputs, block(result, b, block_bytes), call.count, call.dtype,
                               call.op, stream_);
      }
      for (std::size_t r = 0; r < world; ++r) {
        copy(calls[r].recv, block(result, r, block_bytes), block_bytes);
      }
      return;
    }
    case CollectiveKind::AllGather: {  // block r of every recv is rank r's send
      void* result = scratch(world * block_bytes);
      for (std::size_t r = 0; r < world; ++r) {
        copy(block(result, r, block_bytes), calls[r].send, block_bytes);
      }
      for (const CallDesc& c : calls) copy(c.recv, result, world * block_bytes);
      return;
    }
    case CollectiveKind::AllToAll: {  // block b of rank r's recv is block r of rank b's send
      void* result = scratch(world * world * block_bytes);
      for (std::size_t r = 0; r < world; ++r) {
        for (std::size_t b = 0; b < world; ++b) {
          copy(block(result, r * world + b, block_bytes), block(calls[b].send, r, block_bytes),
               block_bytes);
        }
      }
      for (std::size_t r = 0; r < world; ++r) {
        copy(calls[r].recv, block(result, r * world, block_bytes), world * block_bytes);
      }
      return;
    }
    case CollectiveKind::Broadcast: {
      void* result = scratch(block_bytes);
      copy(result, calls[static_cast<std::size_t>(call.root)].send, block_bytes);
      for (const CallDesc& c : calls) copy(c.recv, result, block_bytes);
      return;
    }
    case CollectiveKind::Barrier:
      return;
  }
}

CollectiveMemory& cuda_collective_memory() {
  static CudaCollectiveMemory* const instance = [] {
    auto* space = new CudaCollectiveMemory();
    register_collective_memory(*space);
    return space;
  }();
  return *instance;
}

}  // namespace zl
