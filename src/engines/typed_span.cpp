// typed_span.cpp — slicing, widening, rounding, copying and adding typed spans.
#include "engines/typed_span.hpp"

#include <cstring>

namespace zl {

namespace {

float load(DType dtype, const void* data, std::size_t i) {
  switch (dtype) {
    case DType::F32:
      return static_cast<const float*>(data)[i];
    case DType::BF16:
      return bf16_to_f32(static_cast<const std::uint16_t*>(data)[i]);
    case DType::F16:
      return f16_to_f32(static_cast<const std::uint16_t*>(data)[i]);
    default:
      break;
  }
  fail("{} is not a training dtype: use fp32, bf16 or fp16", dtype_name(dtype));
}

void store(DType dtype, void* data, std::size_t i, float value) {
  switch (dtype) {
    case DType::F32:
      static_cast<float*>(data)[i] = value;
      return;
    case DType::BF16:
      static_cast<std::uint16_t*>(data)[i] = f32_to_bf16(value);
      return;
    case DType::F16:
      static_cast<std::uint16_t*>(data)[i] = f32_to_f16(value);
      return;
    default:
      break;
  }
  fail("{} is not a training dtype: use fp32, bf16 or fp16", dtype_name(dtype));
}

void check_same(TypedSpan a, TypedSpan b, const char* what) {
  ZL_CHECK(a.dtype == b.dtype && a.elems == b.elems, "{}: {} x {} vs {} x {}", what, a.elems,
           dtype_name(a.dtype), b.elems, dtype_name(b.dtype));
}

}  // namespace

TypedSpan TypedSpan::slice(std::int64_t begin, std::int64_t count) const {
  ZL_CHECK(begin >= 0 && count >= 0 && begin + count <= elems,
           "slice [{}, {}) of a span of {} elements", begin, begin + count, elems);
  auto* bytes = static_cast<std::uint8_t*>(data);
  return {bytes + begin * static_cast<std::int64_t>(dtype_bytes(dtype)), count, dtype};
}

std::span<float> TypedSpan::f32() const {
  ZL_CHECK(dtype == DType::F32, "a {} span viewed as fp32", dtype_name(dtype));
  return {static_cast<float*>(data), static_cast<std::size_t>(elems)};
}

TypedSpan view_of(Buffer& buffer) {
  return {buffer.data(), buffer.elems(), buffer.dtype()};
}

void widen(TypedSpan in, std::span<float> out) {
  ZL_CHECK(static_cast<std::int64_t>(out.size()) == in.elems, "widen {} elements into {}",
           in.elems, out.size());
  if (in.dtype == DType::F32) {
    if (in.elems > 0 && in.data != out.data()) std::memcpy(out.data(), in.data, in.bytes());
    return;
  }
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = load(in.dtype, in.data, i);
}

void round_into(std::span<const float> in, TypedSpan out) {
  ZL_CHECK(static_cast<std::int64_t>(in.size()) == out.elems, "round {} elements into {}",
           in.size(), out.elems);
  if (out.dtype == DType::F32) {
    if (out.elems > 0 && in.data() != out.data) std::memcpy(out.data, in.data(), out.bytes());
    return;
  }
  for (std::size_t i = 0; i < in.size(); ++i) store(out.dtype, out.data, i, in[i]);
}

void copy_into(TypedSpan from, TypedSpan to) {
  check_same(from, to, "copy");
  if (from.elems > 0 && from.data != to.data) std::memcpy(to.data, from.data, from.bytes());
}

void add_into(TypedSpan acc, TypedSpan add) {
  check_same(acc, add, "add");
  for (std::size_t i = 0; i < static_cast<std::size_t>(acc.elems); ++i) {
    store(acc.dtype, acc.data, i, load(acc.dtype, acc.data, i) + load(add.dtype, add.data, i));
  }
}

}  // namespace zl
