// typed_span.hpp — a view of elements of any training dtype (fp32, bf16, fp16): a unit buffer or
// a shard of one, in a device's memory. Mixed precision holds parameters and gradients in 16
// bits; these helpers are the only places that widen them to fp32 (exact) or round fp32 to them
// (nearest even), so every engine and the reference convert the same way. They check sizes and
// hand the work to the Device (ops/device.hpp), whose memory the host may not reach.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "core/buffer.hpp"
#include "ops/device.hpp"

namespace zl {

/// `elems` elements of `dtype` starting at `data`.
struct TypedSpan {
  void* data = nullptr;      ///< first element; not owned (the Buffer it views outlives the span)
  std::int64_t elems = 0;    ///< number of elements
  DType dtype = DType::F32;  ///< element type: F32, BF16 or F16

  /// Elements [begin, begin + count).
  TypedSpan slice(std::int64_t begin, std::int64_t count) const;
  /// The fp32 elements; the dtype must be F32.
  std::span<float> f32() const;
  /// Size in bytes, elems * dtype_bytes(dtype).
  std::int64_t bytes() const { return elems * static_cast<std::int64_t>(dtype_bytes(dtype)); }
};

/// All of `buffer`.
TypedSpan view_of(Buffer& buffer);

/// `span` as a kernel reads it (ops/tensor_view.hpp): the same elements, read-only.
inline TensorIn tensor_of(TypedSpan span) {
  return {span.data, span.elems, span.dtype};
}

/// out[i] = in[i] widened to fp32 (exact), on `device`. Sizes must match.
void widen(Device& device, TypedSpan in, std::span<float> out);

/// out[i] = in[i] rounded to out's dtype (nearest even; a copy for fp32), on `device`. Sizes must
/// match.
void round_into(Device& device, std::span<const float> in, TypedSpan out);

/// out[i] = host[i] rounded to out's dtype (nearest even; fp32 as it is) on the host, the bits
/// Device::convert gives, then copied into the device memory `out`: no device scratch. Sizes must
/// match.
void upload_rounded(Device& device, std::span<const float> host, TypedSpan out);

/// out[i] = in[i], copied to the host and widened to fp32 there (exact): upload_rounded's way
/// back, with no device scratch. Sizes must match.
void download_widened(Device& device, TypedSpan in, std::span<float> out);

/// to[i] = from[i] on `device`; same dtype and size.
void copy_into(Device& device, TypedSpan from, TypedSpan to);

/// acc[i] = acc[i] + add[i], summed in fp32 and rounded once to the dtype: exactly what a
/// two-input rank-order Sum (comm/reduce.hpp) computes. On `device`; same dtype and size.
void add_into(Device& device, TypedSpan acc, TypedSpan add);

}  // namespace zl
