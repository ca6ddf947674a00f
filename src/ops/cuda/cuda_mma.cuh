// cuda_mma.cuh — one warp's tensor-core product for the fast attention kernels (private to
// src/ops/cuda): pairs of 16-bit elements packed in 32-bit words, and D += A B for a 16 x 16 A, a
// 16 x 8 B and a 16 x 8 fp32 D (PTX's mma.sync m16n8k16, fp32 accumulation), A and B in one
// 16-bit format, the template parameter Half of pack and product: bf16 (std::uint16_t) or fp16
// (Fp16). Each lane holds a
// fixed part of each operand, as PTX lays them out (lane = 4 * group + pair):
//   A: a[0] = row group, columns 2 pair and 2 pair + 1; a[1] = row group + 8, the same columns;
//      a[2] and a[3] = the same rows, columns + 8.
//   B: b0 = rows (k) 2 pair and 2 pair + 1 of column group; b1 = rows + 8.
//   D: d[0], d[1] = row group, columns 2 pair and 2 pair + 1; d[2], d[3] = row group + 8.
// So two neighbouring D tiles of 8 columns, packed to 16 bits, are an A operand of 16 columns, and
// a product's probabilities stay in registers for the next product.
//
// B operands come from row-major 16-bit tiles in shared memory by ldmatrix: four 8 x 8 matrices a
// call, lane 8 i + j giving the address of matrix i's row j (16 bytes, 16-byte aligned). Plain,
// lane (group, pair) gets matrix i's row group, columns 2 pair and 2 pair + 1; transposed, its
// rows 2 pair and 2 pair + 1 of column group, so a tile stored [k][n] gives B without a
// transposed copy. Tiles come into shared memory by cp.async (16 bytes a thread, no registers on
// the way), committed as a group and waited for before the barrier that publishes them. An
// emulator that runs the kernels on the CPU (tests/cuda_emulation) defines ZL_CUDA_EMULATOR and
// its own stand-ins.
#pragma once

#include <cuda_runtime.h>
#if defined(__CUDACC__)
#include "ops/cuda/cuda_dtype.cuh"
#endif

#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "core/dtype.hpp"
#include "ops/cuda/fp16_bits.hpp"
#include "ops/host_device.hpp"

namespace zl::cuda::mma {

/// The bf16 bits of `value`, rounded to nearest even (a NaN stays a quiet NaN).
ZL_HOST_DEVICE inline std::uint32_t bf16_bits(float value) {
  const std::uint32_t bits = host_device::bits_of(value);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return (bits >> 16) | 0x0040u;
  return (bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16;
}

/// `low` and `high` rounded to bf16 in one word, `low` in its low half (the element of smaller
/// index, as mma.sync reads a pair). On the GPU one cvt.rn.bf16x2 (the same rounding; a NaN
/// becomes the canonical one).
ZL_HOST_DEVICE inline std::uint32_t pack_bf16(float low, float high) {
#if defined(__CUDA_ARCH__)
  std::uint32_t word;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;\n" : "=r"(word) : "f"(high), "f"(low));
  return word;
#else
  return bf16_bits(low) | (bf16_bits(high) << 16);
#endif
}

/// The fp16 bits of `value`, rounded to nearest even (subnormals, overflow to infinity); a NaN
/// becomes the quiet NaN 0x7E00 with its sign kept: core/dtype.hpp's f32_to_f16 on either side.
ZL_HOST_DEVICE inline std::uint16_t f16_bits(float value) {
#if defined(__CUDA_ARCH__)
  return to_f16(value);
#else
  return f32_to_f16(value);
#endif
}

/// `low` and `high` rounded to Half (nearest even) in one word, `low` in its low half: pack_bf16
/// for bf16; for fp16 one cvt.rn.f16x2 on the GPU (core/dtype.hpp's f32_to_f16 elsewhere: the same
/// rounding, subnormals and overflow to infinity included; a NaN becomes the canonical one).
template <class Half>
ZL_HOST_DEVICE inline std::uint32_t pack(float low, float high) {
  if constexpr (std::is_same_v<Half, Fp16>) {
#if defined(__CUDA_ARCH__)
    std::uint32_t word;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;\n" : "=r"(word) : "f"(high), "f"(low));
    return word;
#else
    return std::uint32_t{f32_to_f16(low)} | (std::uint32_t{f32_to_f16(high)} << 16);
#endif
  } else {
    static_assert(std::is_same_v<Half, std::uint16_t>, "Half is bf16 (std::uint16_t) or Fp16");
    return pack_bf16(low, high);
  }
}

/// 2^x for the softmax: ex2.approx.ftz on the GPU (2 ulp, results below 2^-126 flushed to 0,
/// deterministic), exp2f elsewhere.
ZL_HOST_DEVICE inline float exp2_approx(float x) {
#if defined(__CUDA_ARCH__)
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#else
  return std::exp2(x);
#endif
}

/// The float of the bf16 in the low (`high` false) or high half of `word`.
ZL_HOST_DEVICE inline float unpack_bf16(std::uint32_t word, bool high) {
  return host_device::float_from_bits(high ? (word & 0xFFFF0000u) : (word << 16));
}

/// The float of the fp16 `bits` (exact): f16_to_f32 on either side.
ZL_HOST_DEVICE inline float widen_f16(std::uint16_t bits) {
#if defined(__CUDA_ARCH__)
  return from_f16(bits);
#else
  return f16_to_f32(bits);
#endif
}

/// The float of the Half in the low (`high` false) or high half of `word`.
template <class Half>
ZL_HOST_DEVICE inline float unpack(std::uint32_t word, bool high) {
  if constexpr (std::is_same_v<Half, Fp16>) {
    return widen_f16(static_cast<std::uint16_t>(high ? word >> 16 : word & 0xFFFFu));
  } else {
    return unpack_bf16(word, high);
  }
}

#if defined(ZL_CUDA_EMULATOR)
/// d += a b on one warp's 32 lanes, every lane calling it, a and b in Half (the emulator's
/// stand-in).
template <class Half>
inline void product(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                    std::uint32_t b1) {
  cuda_emulation::mma_m16n8k16(d, a, b0, b1,
                               [](std::uint16_t bits) { return unpack<Half>(bits, false); });
}
/// Four 8 x 8 16-bit matrices from shared memory, `row` this lane's row address (stand-in).
inline void load_matrices(std::uint32_t (&r)[4], const std::uint32_t* row) {
  cuda_emulation::ldmatrix_x4(r, row, false);
}
/// The same, transposed (stand-in).
inline void load_matrices_transposed(std::uint32_t (&r)[4], const std::uint32_t* row) {
  cuda_emulation::ldmatrix_x4(r, row, true);
}
/// 16 bytes from global `from` to shared `to`, asynchronously (stand-in: a copy).
inline void copy16_async(std::uint32_t* to, const void* from) {
  std::memcpy(to, from, 16);
}
/// 4 bytes, the same way (stand-in: a copy).
inline void copy4_async(float* to, const float* from) {
  *to = *from;
}
/// Closes this thread's group of asynchronous copies (stand-in: nothing to close).
inline void commit_copies() {}
/// Waits for every group this thread committed (stand-in: they are done).
inline void wait_copies() {}
#else
/// d += a b on one warp's 32 lanes, every lane calling it: mma.sync m16n8k16, operands in Half
/// (bf16 or fp16), fp32 accumulators (sm_80 and later).
template <class Half>
__device__ inline void product(float (&d)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                               std::uint32_t b1) {
  if constexpr (std::is_same_v<Half, Fp16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

__device__ inline std::uint32_t shared_address(const void* pointer) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(pointer));
}

/// Four 8 x 8 16-bit matrices from shared memory, `row` this lane's row address: ldmatrix.x4.
__device__ inline void load_matrices(std::uint32_t (&r)[4], const std::uint32_t* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row))
               : "memory");
}

/// The same, transposed: ldmatrix.x4.trans.
__device__ inline void load_matrices_transposed(std::uint32_t (&r)[4], const std::uint32_t* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row))
               : "memory");
}

/// 16 bytes from global `from` (16-byte aligned) to shared `to`, asynchronously: cp.async.cg.
__device__ inline void copy16_async(std::uint32_t* to, const void* from) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n"
               :
               : "r"(shared_address(to)), "l"(from)
               : "memory");
}

/// 4 bytes, the same way: cp.async.ca.
__device__ inline void copy4_async(float* to, const float* from) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n"
               :
               : "r"(shared_address(to)), "l"(from)
               : "memory");
}

/// Closes this thread's group of asynchronous copies.
__device__ inline void commit_copies() {
  asm volatile("cp.async.commit_group;\n" ::: "memory");
}

/// Waits for every group this thread committed (a barrier after it publishes them to the block).
__device__ inline void wait_copies() {
  asm volatile("cp.async.wait_group 0;\n" ::: "memory");
}
#endif

}  // namespace zl::cuda::mma
