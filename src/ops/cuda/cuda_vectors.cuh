// cuda_vectors.cuh — 8 elements a thread in 16-byte loads and stores (private to src/ops/cuda), and
// a row's columns read and written kWidth (8 or 1) at a time:
// the step's conversions, the bias kernels and the cross-entropy move fp32, bf16 and fp16 arrays
// this way where they are 16-byte aligned. A 16-bit element is widened exactly and rounded to
// nearest even (cuda_dtype.cuh), so a vector kernel gives its scalar twin's bits.
#pragma once

#include <cstdint>

#include "core/dtype.hpp"
#include "ops/cuda/cuda_dtype.cuh"
#include "ops/cuda/cuda_elements.cuh"
#include "ops/cuda/fp16_bits.hpp"

namespace zl::cuda {

/// Elements a thread moves at once: 16 bytes of 16-bit values, two 16-byte moves of fp32.
inline constexpr int kVector = 8;

/// Whether `p` is 16-byte aligned (a vector kernel may read and write there).
inline bool aligned16(const void* p) {
  return reinterpret_cast<std::uintptr_t>(p) % 16 == 0;
}

/// A 16-bit element of `kDtype` (bf16 or fp16) widened to fp32 (exact).
template <DType kDtype>
__device__ float widen(std::uint16_t bits) {
  return kDtype == DType::BF16 ? from_bf16(bits) : from_f16(bits);
}
/// `value` rounded to nearest even into `kDtype` (bf16 or fp16), in the low 16 bits.
template <DType kDtype>
__device__ std::uint32_t narrow(float value) {
  return kDtype == DType::BF16 ? to_bf16(value) : to_f16(value);
}

/// x = the 8 elements of vector v (elements 8v .. 8v + 7) widened to fp32.
template <DType kDtype>
__device__ void load8(const void* data, std::int64_t v, float (&x)[kVector]) {
  if constexpr (kDtype == DType::F32) {
    const float4* p = static_cast<const float4*>(data) + 2 * v;
    const float4 a = p[0], b = p[1];
    x[0] = a.x, x[1] = a.y, x[2] = a.z, x[3] = a.w, x[4] = b.x, x[5] = b.y, x[6] = b.z, x[7] = b.w;
  } else {
    const uint4 w = static_cast<const uint4*>(data)[v];
    const std::uint32_t words[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      x[2 * i] = widen<kDtype>(static_cast<std::uint16_t>(words[i] & 0xFFFFu));
      x[2 * i + 1] = widen<kDtype>(static_cast<std::uint16_t>(words[i] >> 16));
    }
  }
}

/// Vector v of `data` = x rounded to nearest even into the dtype.
template <DType kDtype>
__device__ void store8(void* data, std::int64_t v, const float (&x)[kVector]) {
  if constexpr (kDtype == DType::F32) {
    float4* p = static_cast<float4*>(data) + 2 * v;
    p[0] = make_float4(x[0], x[1], x[2], x[3]);
    p[1] = make_float4(x[4], x[5], x[6], x[7]);
  } else {
    std::uint32_t words[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      words[i] = narrow<kDtype>(x[2 * i]) | (narrow<kDtype>(x[2 * i + 1]) << 16);
    }
    static_cast<uint4*>(data)[v] = make_uint4(words[0], words[1], words[2], words[3]);
  }
}

/// The dtype of an element pointer the kernels take: fp32 as float, bf16 as std::uint16_t, fp16
/// as Fp16.
template <class T>
inline constexpr DType kDtypeOf = sizeof(T) == 4 ? DType::F32 : DType::BF16;
template <>
inline constexpr DType kDtypeOf<Fp16> = DType::F16;

/// x = kWidth elements of `row` from column `first` (a vector's, or one).
template <int kWidth, class T>
__device__ void load_columns(const T* row, std::int64_t first, float (&x)[kWidth]) {
  if constexpr (kWidth == kVector) {
    load8<kDtypeOf<T>>(row, first / kVector, x);
  } else {
    x[0] = get(row + first);
  }
}

/// kWidth elements of `row` from column `first` = x, rounded into T.
template <int kWidth, class T>
__device__ void store_columns(T* row, std::int64_t first, const float (&x)[kWidth]) {
  if constexpr (kWidth == kVector) {
    store8<kDtypeOf<T>>(row, first / kVector, x);
  } else {
    put(row + first, x[0]);
  }
}

}  // namespace zl::cuda
