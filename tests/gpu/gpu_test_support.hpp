// gpu_test_support.hpp — what the GPU tests share: the skip when no GPU is present, copies between
// host vectors and device buffers, seeded random inputs (floats, and raw bytes of any dtype), and
// the comparisons the kernel tests use (the largest difference relative to the largest reference
// magnitude, or bits, printed with the first differing index).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <span>
#include <vector>

#include "core/buffer.hpp"
#include "core/dtype.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_device.hpp"
#include "support/same_bits.hpp"

/// Skips the calling test, saying why, when this machine has no CUDA GPU.
#define ZL_REQUIRE_GPU()                                                                      \
  do {                                                                                        \
    if (::zl::CudaDevice::device_count() == 0)                                                \
      GTEST_SKIP() << "no CUDA GPU on this machine: GPU tests run only where one is present"; \
  } while (0)

namespace zl::test {

/// `elems` values uniform in [low, high) from a fixed seed.
inline std::vector<float> random_floats(std::size_t elems, std::uint32_t seed, float low = -1.0f,
                                        float high = 1.0f) {
  std::mt19937 engine(seed);
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> values(elems);
  for (auto& value : values) value = uniform(engine);
  return values;
}

/// A device buffer (booked under `category`) holding a copy of `host`.
template <class T>
Buffer upload(CudaDevice& device, const std::vector<T>& host, DType dtype,
              MemCategory category = MemCategory::Activations) {
  Buffer buffer = device.alloc(category, dtype, {static_cast<std::int64_t>(host.size())});
  ZL_CUDA_CHECK(
      cudaMemcpy(buffer.data(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice));
  return buffer;
}

inline Buffer upload(CudaDevice& device, const std::vector<float>& host) {
  return upload(device, host, DType::F32);
}

/// The device buffer's elements, after the device's queued work.
template <class T = float>
std::vector<T> download(CudaDevice& device, const Buffer& buffer) {
  device.synchronize();
  std::vector<T> host(static_cast<std::size_t>(buffer.elems()));
  ZL_CUDA_CHECK(
      cudaMemcpy(host.data(), buffer.data(), host.size() * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}

/// A float buffer's device span.
inline std::span<float> span_of(Buffer& buffer) {
  return buffer.as<float>();
}
inline std::span<const float> cspan_of(const Buffer& buffer) {
  return buffer.as<float>();
}

/// Asserts max_i |actual[i] - expected[i]| <= relative_tolerance * max_i |expected[i]|, printing
/// the worst element with both values.
inline void expect_close(const std::vector<float>& actual, const std::vector<float>& expected,
                         double relative_tolerance, const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double scale = 0.0, worst = 0.0;
  std::size_t worst_index = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    scale = std::max(scale, std::abs(static_cast<double>(expected[i])));
    const double difference = std::abs(static_cast<double>(actual[i]) - expected[i]);
    if (!(difference <= worst)) {  // NaN counts as worst
      worst = difference;
      worst_index = i;
    }
  }
  EXPECT_TRUE(worst <= relative_tolerance * scale)
      << what << ": largest difference " << worst << " at element " << worst_index << " (gpu "
      << actual[worst_index] << ", cpu " << expected[worst_index] << ") exceeds "
      << relative_tolerance << " x max |cpu| = " << relative_tolerance * scale;
}

/// Element i of a buffer of `dtype` as a double (16-bit types widened exactly), to print it and
/// to tell NaN apart.
inline double value_at(std::span<const std::byte> bytes, DType dtype, std::size_t i) {
  switch (dtype) {
    case DType::F32: {
      float v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      return v;
    }
    case DType::F64: {
      double v;
      std::memcpy(&v, bytes.data() + 8 * i, 8);
      return v;
    }
    case DType::BF16:
    case DType::F16: {
      std::uint16_t v;
      std::memcpy(&v, bytes.data() + 2 * i, 2);
      return dtype == DType::BF16 ? bf16_to_f32(v) : f16_to_f32(v);
    }
    case DType::I64: {
      std::int64_t v;
      std::memcpy(&v, bytes.data() + 8 * i, 8);
      return static_cast<double>(v);
    }
    case DType::I8:
      return static_cast<double>(static_cast<std::int8_t>(bytes[i]));
  }
  return 0.0;
}

/// `elems` random values of `dtype` as bytes, from floats in [-70000, 70000) (fp16 ones divided
/// by 8 to stay mostly finite, fp64 ones by 3 to use their precision): element 3 is infinity,
/// 5 is 1e-6 (fp16 subnormal), and 7 NaN when `with_nan` (when there are more than 10).
inline std::vector<std::byte> random_values(DType dtype, std::size_t elems, std::uint32_t seed,
                                            bool with_nan) {
  auto floats = random_floats(elems, seed, -70000.0f, 70000.0f);
  if (elems > 10) {
    floats[3] = std::numeric_limits<float>::infinity();
    floats[5] = 1e-6f;
    if (with_nan) floats[7] = std::numeric_limits<float>::quiet_NaN();
  }
  std::vector<std::byte> bytes(elems * dtype_bytes(dtype));
  for (std::size_t i = 0; i < elems; ++i) {
    switch (dtype) {
      case DType::F32:
        std::memcpy(bytes.data() + 4 * i, &floats[i], 4);
        break;
      case DType::F64: {
        const double v = static_cast<double>(floats[i]) / 3.0;
        std::memcpy(bytes.data() + 8 * i, &v, 8);
        break;
      }
      case DType::BF16: {
        const std::uint16_t v = f32_to_bf16(floats[i]);
        std::memcpy(bytes.data() + 2 * i, &v, 2);
        break;
      }
      case DType::F16: {
        const std::uint16_t v = f32_to_f16(floats[i] / 8.0f);
        std::memcpy(bytes.data() + 2 * i, &v, 2);
        break;
      }
      case DType::I64: {
        const auto v = static_cast<std::int64_t>(floats[i] * 1000.0f);
        std::memcpy(bytes.data() + 8 * i, &v, 8);
        break;
      }
      case DType::I8:
        bytes[i] = static_cast<std::byte>(static_cast<std::int8_t>(floats[i] / 1000.0f));
        break;
    }
  }
  return bytes;
}

/// A device buffer of `elems` elements of `dtype` holding `bytes`.
inline Buffer upload_bytes(CudaDevice& device, const std::vector<std::byte>& bytes, DType dtype,
                           std::size_t elems) {
  Buffer buffer = device.alloc(MemCategory::CommBuffer, dtype, {static_cast<std::int64_t>(elems)});
  ZL_CUDA_CHECK(cudaMemcpy(buffer.data(), bytes.data(), bytes.size(), cudaMemcpyHostToDevice));
  return buffer;
}

/// A device buffer's bytes, after the device's queued work.
inline std::vector<std::byte> download_bytes(CudaDevice& device, const Buffer& buffer) {
  device.synchronize();
  std::vector<std::byte> bytes(static_cast<std::size_t>(buffer.bytes()));
  ZL_CUDA_CHECK(cudaMemcpy(bytes.data(), buffer.data(), bytes.size(), cudaMemcpyDeviceToHost));
  return bytes;
}

/// The first element where `actual` and `expected` (arrays of `dtype`) differ in bits, or -1.
/// With `any_nan`, a NaN matches a NaN whatever its sign and payload (results of arithmetic,
/// whose NaN the GPU makes canonical).
inline std::int64_t first_difference(std::span<const std::byte> actual,
                                     std::span<const std::byte> expected, DType dtype,
                                     bool any_nan) {
  const std::size_t width = dtype_bytes(dtype);
  if (actual.size() != expected.size()) return 0;
  for (std::size_t i = 0; i < expected.size() / width; ++i) {
    if (std::memcmp(actual.data() + width * i, expected.data() + width * i, width) == 0) continue;
    if (any_nan && dtype != DType::I64 && std::isnan(value_at(actual, dtype, i)) &&
        std::isnan(value_at(expected, dtype, i))) {
      continue;
    }
    return static_cast<std::int64_t>(i);
  }
  return -1;
}

}  // namespace zl::test
