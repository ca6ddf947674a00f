// cuda_runtime.h (tests/cuda_emulation) — what a CUDA kernel written in zerolab's style needs to
// run on the CPU: `__global__` and `__device__` as nothing, threadIdx, blockIdx and blockDim,
// float4,
// __syncthreads, __syncwarp, the warp shuffles, dynamic shared memory, and `emulate`, which
// launches a kernel. Each CUDA thread of a block is a std::thread; __syncthreads is a barrier of
// the block's threads, a shuffle is two barriers of the warp's 32 (one to publish every lane's
// value, one before the slots are reused); blocks run one after another. So a kernel that
// forgets a __syncthreads reads a tile that is still being written, which ThreadSanitizer reports
// and the results show. Shared memory is a vector of exactly the launch's bytes (AddressSanitizer
// catches an access past it), filled with NaN, so a read of an element no thread wrote shows.
// Test-only: this header stands in for the toolkit's, and no CUDA header may be on the path.
#pragma once

#include <barrier>
#include <cmath>
#include <cstddef>
#include <memory>
#include <thread>
#include <vector>

/// A kernel's grid or block shape.
struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned x_in = 1, unsigned y_in = 1, unsigned z_in = 1) : x(x_in), y(y_in), z(z_in) {}
};
/// Four floats, 16-byte aligned, as CUDA's vector type.
struct alignas(16) float4 {
  float x, y, z, w;
};
/// Streams are accepted and ignored: a launch runs to completion before `emulate` returns.
using cudaStream_t = void*;

#define __global__
#define __device__
#define __launch_bounds__(threads)

namespace zl::cuda_emulation {

/// The synchronisation of the calling CUDA thread's block and warp.
struct ThreadPlace {
  std::barrier<>* block = nullptr;
  std::barrier<>* warp = nullptr;
  double* warp_slots = nullptr;  // one per lane, wide enough for a double
};
inline thread_local ThreadPlace place;
inline std::vector<float> shared_memory;

/// The running block's dynamic shared memory.
inline float* shared_floats() {
  return shared_memory.data();
}

/// Lane `source`'s `value`, for every lane of the warp.
template <class T>
T exchange(T value, unsigned source);

}  // namespace zl::cuda_emulation

inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim;

#define ZL_DYNAMIC_SHARED_FLOATS(name) float* name = ::zl::cuda_emulation::shared_floats()

inline void __syncthreads() {
  zl::cuda_emulation::place.block->arrive_and_wait();
}
inline void __syncwarp() {
  zl::cuda_emulation::place.warp->arrive_and_wait();
}
template <class T>
T __shfl_sync(unsigned, T value, int source_lane) {
  return zl::cuda_emulation::exchange(value, static_cast<unsigned>(source_lane));
}
template <class T>
T __shfl_xor_sync(unsigned, T value, int lane_mask) {
  return zl::cuda_emulation::exchange(value, (threadIdx.x % 32) ^ static_cast<unsigned>(lane_mask));
}

namespace zl::cuda_emulation {

template <class T>
T exchange(T value, unsigned source) {
  static_assert(sizeof(T) <= sizeof(double));
  T* slots = reinterpret_cast<T*>(place.warp_slots);
  slots[threadIdx.x % 32] = value;
  place.warp->arrive_and_wait();
  const T result = slots[source];
  place.warp->arrive_and_wait();
  return result;
}

/// emulate(kernel, grid, block, shared_bytes)(args...) runs kernel(args...) on every thread of
/// every block of the grid (block.x threads, a multiple of 32; y and z of the block 1).
template <class Kernel>
auto emulate(Kernel kernel, dim3 grid, dim3 block, std::size_t shared_bytes) {
  return [=](auto... args) {
    blockDim = block;
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        shared_memory.assign(shared_bytes / sizeof(float), std::nanf(""));
        shared_memory.shrink_to_fit();
        std::barrier<> block_barrier(block.x);
        std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
        std::vector<double> slots(block.x);
        for (unsigned w = 0; w < block.x / 32; ++w) {
          warp_barriers.push_back(std::make_unique<std::barrier<>>(32));
        }
        std::vector<std::thread> threads;
        for (unsigned t = 0; t < block.x; ++t) {
          threads.emplace_back([&, t] {
            threadIdx = dim3(t);
            blockIdx = dim3(x, y);
            place = {&block_barrier, warp_barriers[t / 32].get(), slots.data() + t / 32 * 32};
            kernel(args...);
          });
        }
        for (std::thread& thread : threads) thread.join();
      }
    }
  };
}

}  // namespace zl::cuda_emulation
