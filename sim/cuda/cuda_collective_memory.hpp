// cuda_collective_memory.hpp — GPU memory as a CollectiveMemory (sim/collective_memory.hpp): when
// the simulator's ranks keep their buffers on a GPU (one CudaDevice per rank, all on the same
// GPU), their collectives run there, staged through one device scratch buffer: reductions are
// reduce_rank_order_cuda (the host's bits), the rest device-to-device copies.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>
#include <span>

#include "call_desc.hpp"
#include "collective_memory.hpp"

namespace zl {

/// CUDA device memory, as the simulator sees it. execute() is serialized by a mutex (the scratch
/// is shared), so one instance serves every SimWorld of the process. The scratch grows to the
/// largest collective's result (W blocks for reduce_scatter and all_gather) and belongs to no
/// rank: no CudaDevice's ledger books it.
class CudaCollectiveMemory final : public CollectiveMemory {
 public:
  CudaCollectiveMemory() = default;
  /// Frees the scratch and the stream (errors are ignored: this may run at exit).
  ~CudaCollectiveMemory() override;
  CudaCollectiveMemory(const CudaCollectiveMemory&) = delete;
  CudaCollectiveMemory& operator=(const CudaCollectiveMemory&) = delete;

  /// True when cudaPointerGetAttributes says `ptr` is device memory (cudaMemoryTypeDevice).
  /// Host, managed and unknown pointers, and any pointer when there is no GPU, give false; a
  /// failed query's error is cleared, never thrown.
  bool holds(const void* ptr) const override;

  /// On the GPU of the buffers (every buffer must be on the same one): waits for all work on that
  /// GPU (the ranks' streams may still be writing their send buffers), computes the result into the
  /// scratch (all_reduce: reduce_rank_order_cuda of every send; reduce_scatter: block b of every
  /// send into scratch block b; all_gather: send r into scratch block r; broadcast: the root's
  /// send), copies it to every recv (reduce_scatter: scratch block r to rank r), and waits for
  /// it. Staging first makes in-place and overlapping buffers correct. Restores the calling
  /// thread's current device. Throws zl::Error when a buffer is on another GPU or a CUDA call
  /// fails, for what reduce_rank_order_cuda rejects (int64, more than kReduceMaxRanks), and for a
  /// reduction in a world of several nodes (CallDesc::gpus_per_node: it sums in one level only).
  void execute(std::span<const CallDesc> calls) override;

 private:
  // Makes `device` the one the stream and scratch belong to (releasing those of another).
  void use_device(int device);
  // At least `bytes` of device scratch on the current device, grown (never shrunk) on demand.
  void* scratch(std::size_t bytes);
  // Queues a device-to-device copy of `bytes` on stream_ (nothing for 0 bytes or to == from).
  void copy(void* to, const void* from, std::size_t bytes);
  // The collective itself, on the current device, queued on stream_.
  void run(std::span<const CallDesc> calls);

  std::mutex mutex_;
  int device_ = -1;  // the GPU stream_ and scratch_ are on; -1 before the first collective
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
};

/// The process's CudaCollectiveMemory, made and registered (register_collective_memory) on the
/// first call, so every SimWorld made afterwards hands GPU buffers to it. Never destroyed, so no
/// CUDA call runs during static destruction. Thread-safe.
CollectiveMemory& cuda_collective_memory();

}  // namespace zl
