// cuda_runtime.h (tests/cuda_emulation) — what a CUDA kernel written in zerolab's style needs to
// run on the CPU: `__global__` and `__device__` as nothing, threadIdx, blockIdx and blockDim,
// float4, uint2, uint4,
// __syncthreads, __syncwarp, the warp shuffles, dynamic shared memory, a stand-in for the tensor
// cores' mma.sync m16n8k16 on bf16 or fp16 and for ldmatrix (ZL_CUDA_EMULATOR tells
// ops/cuda/cuda_mma.cuh to call them; its cp.async stand-ins copy at once), and `emulate`, which
// launches a kernel. Each CUDA thread of a block is a std::thread; __syncthreads is a barrier of
// the block's threads, a shuffle is two barriers of the warp's 32 (one to publish every lane's
// value, one before the slots are reused); blocks run one after another. So a kernel that forgets a
// __syncthreads reads a tile that is still being written, which ThreadSanitizer reports and the
// results show. Shared memory is a vector of exactly the launch's bytes (AddressSanitizer catches
// an access past it), filled with NaN, so a read of an element no thread wrote shows. Test-only:
// this header stands in for the toolkit's, and no CUDA header may be on the path.
#pragma once

#include <barrier>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
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
/// Two 32-bit words, 8-byte aligned, as CUDA's vector type.
struct alignas(8) uint2 {
  std::uint32_t x, y;
};
/// Four 32-bit words, 16-byte aligned, as CUDA's vector type.
struct alignas(16) uint4 {
  std::uint32_t x, y, z, w;
};
/// Streams are accepted and ignored: a launch runs to completion before `emulate` returns.
using cudaStream_t = void*;

#define ZL_CUDA_EMULATOR 1
#define __global__
#define __device__
#define __launch_bounds__(threads)

namespace zl::cuda_emulation {

/// The synchronisation of the calling CUDA thread's block and warp.
struct ThreadPlace {
  std::barrier<>* block = nullptr;
  std::barrier<>* warp = nullptr;
  double* warp_slots = nullptr;  // one per lane, wide enough for a double
  std::uint32_t* mma_slots = nullptr;  // kMmaWords per lane: an mma's a and b registers
};
inline constexpr int kMmaWords = 6;
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
inline dim3 blockDim, gridDim;

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

/// d += a b for the warp, as mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16}.{bf16,f16}.f32 lays
/// out its operands (ops/cuda/cuda_mma.cuh): every lane publishes its registers, then computes its
/// own 4 accumulators from the rows and columns the others hold, each 16-bit element read by
/// `widen` (bf16 or fp16 to float, exact), the 16 exact products added to d in k order in float
/// (the hardware's order within an MMA is its own: tests compare within a tolerance).
inline void mma_m16n8k16(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                         std::uint32_t b1, float (*widen)(std::uint16_t)) {
  const unsigned lane = threadIdx.x % 32;
  std::uint32_t* slots = place.mma_slots;
  for (int r = 0; r < 4; ++r) slots[lane * kMmaWords + r] = a[r];
  slots[lane * kMmaWords + 4] = b0;
  slots[lane * kMmaWords + 5] = b1;
  place.warp->arrive_and_wait();
  const auto half = [widen](std::uint32_t word, int k) {
    return widen(static_cast<std::uint16_t>(k % 2 == 1 ? word >> 16 : word & 0xFFFFu));
  };
  // A (row, k) is in lane 4 (row % 8) + (k % 8) / 2, register (row >= 8) + 2 (k >= 8);
  // B (k, col) in lane 4 col + (k % 8) / 2, register 4 + (k >= 8); halves by k's parity.
  const auto a_at = [&](unsigned row, int k) {
    const unsigned from = 4 * (row % 8) + static_cast<unsigned>(k % 8) / 2;
    return half(slots[from * kMmaWords + (row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k);
  };
  const auto b_at = [&](int k, unsigned col) {
    const unsigned from = 4 * col + static_cast<unsigned>(k % 8) / 2;
    return half(slots[from * kMmaWords + 4 + (k >= 8 ? 1 : 0)], k);
  };
  const unsigned group = lane / 4, pair = lane % 4;
  for (int e = 0; e < 4; ++e) {
    const unsigned row = group + (e >= 2 ? 8 : 0), col = 2 * pair + (e % 2);
    float sum = d[e];
    for (int k = 0; k < 16; ++k) sum = sum + a_at(row, k) * b_at(k, col);
    d[e] = sum;
  }
  place.warp->arrive_and_wait();
}

/// ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16 for the warp: every lane publishes its row
/// address (lane 8 i + j: matrix i's row j, 8 bf16), then reads its 4 words from the others' rows:
/// plain, matrix i's row lane / 4, columns 2 (lane % 4) and + 1; transposed, rows 2 (lane % 4) and
/// + 1 of column lane / 4 (the lower index in the low half either way).
inline void ldmatrix_x4(std::uint32_t (&r)[4], const std::uint32_t* row, bool transposed) {
  const unsigned lane = threadIdx.x % 32;
  auto** rows = reinterpret_cast<const std::uint16_t**>(place.warp_slots);
  rows[lane] = reinterpret_cast<const std::uint16_t*>(row);
  place.warp->arrive_and_wait();
  const unsigned group = lane / 4, pair = lane % 4;
  for (unsigned i = 0; i < 4; ++i) {
    const std::uint16_t low =
        transposed ? rows[8 * i + 2 * pair][group] : rows[8 * i + group][2 * pair];
    const std::uint16_t high =
        transposed ? rows[8 * i + 2 * pair + 1][group] : rows[8 * i + group][2 * pair + 1];
    r[i] = std::uint32_t{low} | (std::uint32_t{high} << 16);
  }
  place.warp->arrive_and_wait();
}

/// emulate(kernel, grid, block, shared_bytes)(args...) runs kernel(args...) on every thread of
/// every block of the grid (block.x threads, a multiple of 32; y and z of the block 1).
template <class Kernel>
auto emulate(Kernel kernel, dim3 grid, dim3 block, std::size_t shared_bytes) {
  return [=](auto... args) {
    blockDim = block;
    gridDim = grid;
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        shared_memory.assign(shared_bytes / sizeof(float), std::nanf(""));
        shared_memory.shrink_to_fit();
        std::barrier<> block_barrier(block.x);
        std::vector<std::unique_ptr<std::barrier<>>> warp_barriers;
        std::vector<double> slots(block.x);
        std::vector<std::uint32_t> mma_slots(block.x * kMmaWords);
        for (unsigned w = 0; w < block.x / 32; ++w) {
          warp_barriers.push_back(std::make_unique<std::barrier<>>(32));
        }
        std::vector<std::thread> threads;
        for (unsigned t = 0; t < block.x; ++t) {
          threads.emplace_back([&, t] {
            threadIdx = dim3(t);
            blockIdx = dim3(x, y);
            place = {&block_barrier, warp_barriers[t / 32].get(), slots.data() + t / 32 * 32,
                     mma_slots.data() + t / 32 * 32 * kMmaWords};
            kernel(args...);
          });
        }
        for (std::thread& thread : threads) thread.join();
      }
    }
  };
}

}  // namespace zl::cuda_emulation
