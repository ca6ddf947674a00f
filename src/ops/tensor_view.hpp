// tensor_view.hpp — typed views of device memory for the Device's kernels: TensorIn (what a kernel
// reads) and TensorOut (what it writes), elements of fp32, bf16 or fp16. Under mixed precision a
// model hands its 16-bit activations to the kernels as they are kept, and a kernel writes its
// 16-bit output directly, rounded to nearest even from the fp32 value it computes. An fp32 span
// converts to either implicitly, so fp32 code passes spans as before.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/buffer.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"

namespace zl {

/// `elems` elements of `dtype` at `data` in a device's memory, read by a kernel.
struct TensorIn {
  const void* data = nullptr;  ///< first element; not owned
  std::int64_t elems = 0;      ///< number of elements
  DType dtype = DType::F32;    ///< F32, BF16 or F16

  /// An empty fp32 view (an absent bias).
  TensorIn() = default;
  /// `elems` elements of `dtype` at `data`.
  TensorIn(const void* data, std::int64_t elems, DType dtype)
      : data(data), elems(elems), dtype(dtype) {}
  /// An fp32 span.
  TensorIn(std::span<const float> values)  // NOLINT(google-explicit-constructor): fp32 as before
      : data(values.data()), elems(static_cast<std::int64_t>(values.size())) {}
  /// An fp32 span.
  TensorIn(std::span<float> values)  // NOLINT(google-explicit-constructor)
      : TensorIn(std::span<const float>(values)) {}
  /// fp32 values in a vector (a CPU device's memory is the host's).
  TensorIn(const std::vector<float>& values)  // NOLINT(google-explicit-constructor)
      : TensorIn(std::span<const float>(values)) {}
  /// All of `buffer`, in its dtype.
  TensorIn(const Buffer& buffer)  // NOLINT(google-explicit-constructor)
      : data(buffer.data()), elems(buffer.elems()), dtype(buffer.dtype()) {}

  /// True when there are no elements.
  bool empty() const { return elems == 0; }
  /// Elements [offset, offset + count), in the same dtype; throws zl::Error past the end.
  TensorIn subspan(std::int64_t offset, std::int64_t count) const {
    ZL_CHECK(offset >= 0 && count >= 0 && offset + count <= elems,
             "elements [{}, {}) of a tensor of {}: slice within it", offset, offset + count, elems);
    return {static_cast<const char*>(data) + offset * static_cast<std::int64_t>(dtype_bytes(dtype)),
            count, dtype};
  }
  /// The first `count` elements.
  TensorIn first(std::int64_t count) const { return subspan(0, count); }
  /// The fp32 elements; throws zl::Error for another dtype.
  std::span<const float> f32() const {
    ZL_CHECK(dtype == DType::F32, "a {} tensor read as fp32", dtype_name(dtype));
    return {static_cast<const float*>(data), static_cast<std::size_t>(elems)};
  }
};

/// `elems` elements of `dtype` at `data` in a device's memory, written by a kernel.
struct TensorOut {
  void* data = nullptr;      ///< first element; not owned
  std::int64_t elems = 0;    ///< number of elements
  DType dtype = DType::F32;  ///< F32, BF16 or F16

  /// An empty fp32 view.
  TensorOut() = default;
  /// `elems` elements of `dtype` at `data`.
  TensorOut(void* data, std::int64_t elems, DType dtype) : data(data), elems(elems), dtype(dtype) {}
  /// An fp32 span.
  TensorOut(std::span<float> values)  // NOLINT(google-explicit-constructor): fp32 as before
      : data(values.data()), elems(static_cast<std::int64_t>(values.size())) {}
  /// fp32 values in a vector (a CPU device's memory is the host's).
  TensorOut(std::vector<float>& values)  // NOLINT(google-explicit-constructor)
      : TensorOut(std::span<float>(values)) {}
  /// All of `buffer`, in its dtype.
  TensorOut(Buffer& buffer)  // NOLINT(google-explicit-constructor)
      : data(buffer.data()), elems(buffer.elems()), dtype(buffer.dtype()) {}

  /// The same elements, to be read.
  operator TensorIn() const { return {data, elems, dtype}; }  // NOLINT(google-explicit-constructor)
  /// True when there are no elements.
  bool empty() const { return elems == 0; }
  /// The fp32 elements; throws zl::Error for another dtype.
  std::span<float> f32() const {
    ZL_CHECK(dtype == DType::F32, "a {} tensor written as fp32", dtype_name(dtype));
    return {static_cast<float*>(data), static_cast<std::size_t>(elems)};
  }
};

}  // namespace zl
