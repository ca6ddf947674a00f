// host_device.hpp — ZL_HOST_DEVICE, which marks a function compiled for the host and, under nvcc,
// for the GPU too, so the CPU and CUDA devices run one definition (ops/gelu_tanh.hpp,
// ops/attention_tile.hpp); and the bit moves between a float or double and its bits on either.
#pragma once

#include <bit>
#include <cstdint>

#if defined(__CUDACC__)
#define ZL_HOST_DEVICE __host__ __device__
#else
#define ZL_HOST_DEVICE
#endif

namespace zl::host_device {

/// The double with bits `bits`.
ZL_HOST_DEVICE inline double double_from_bits(std::uint64_t bits) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(bits));
#else
  return std::bit_cast<double>(bits);
#endif
}

/// The bits of `value`.
ZL_HOST_DEVICE inline std::uint64_t bits_of(double value) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint64_t>(__double_as_longlong(value));
#else
  return std::bit_cast<std::uint64_t>(value);
#endif
}

/// The float with bits `bits`.
ZL_HOST_DEVICE inline float float_from_bits(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  return std::bit_cast<float>(bits);
#endif
}

/// The bits of `value`.
ZL_HOST_DEVICE inline std::uint32_t bits_of(float value) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(value);
#else
  return std::bit_cast<std::uint32_t>(value);
#endif
}

}  // namespace zl::host_device
