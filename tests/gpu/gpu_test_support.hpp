// gpu_test_support.hpp — what the GPU tests share: the skip when no GPU is present, copies between
// host vectors and device buffers, seeded random inputs, and the comparison every kernel test uses
// (the largest difference relative to the largest reference magnitude, printed with its index).
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "core/buffer.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_device.hpp"

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

/// Asserts the two vectors are equal bit for bit, printing the first difference.
inline void expect_same_bits(const std::vector<float>& actual, const std::vector<float>& expected,
                             const char* what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    if (std::bit_cast<std::uint32_t>(actual[i]) != std::bit_cast<std::uint32_t>(expected[i])) {
      ADD_FAILURE() << what << ": first different element " << i << " (gpu " << actual[i]
                    << ", cpu " << expected[i] << ")";
      return;
    }
  }
}

}  // namespace zl::test
