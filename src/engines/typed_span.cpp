// typed_span.cpp — slicing, widening, rounding, copying and adding typed spans.
#include "engines/typed_span.hpp"

#include <vector>

namespace zl {

namespace {

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

void widen(Device& device, TypedSpan in, std::span<float> out) {
  ZL_CHECK(static_cast<std::int64_t>(out.size()) == in.elems, "widen {} elements into {}",
           in.elems, out.size());
  device.convert(in.data, in.dtype, out.data(), DType::F32, in.elems);
}

void round_into(Device& device, std::span<const float> in, TypedSpan out) {
  ZL_CHECK(static_cast<std::int64_t>(in.size()) == out.elems, "round {} elements into {}",
           in.size(), out.elems);
  device.convert(in.data(), DType::F32, out.data, out.dtype, out.elems);
}

void upload_rounded(Device& device, std::span<const float> host, TypedSpan out) {
  ZL_CHECK(static_cast<std::int64_t>(host.size()) == out.elems, "upload {} elements into {}",
           host.size(), out.elems);
  if (out.dtype == DType::F32) {
    device.copy_from_host(out.data, host.data(), host.size_bytes());
    return;
  }
  ZL_CHECK(out.dtype == DType::BF16 || out.dtype == DType::F16, "upload fp32 values into {}",
           dtype_name(out.dtype));
  std::vector<std::uint16_t> bits(host.size());
  for (std::size_t i = 0; i < bits.size(); ++i) {
    bits[i] = out.dtype == DType::BF16 ? f32_to_bf16(host[i]) : f32_to_f16(host[i]);
  }
  device.copy_from_host(out.data, bits.data(), bits.size() * sizeof(std::uint16_t));
}

void copy_into(Device& device, TypedSpan from, TypedSpan to) {
  check_same(from, to, "copy");
  device.copy(to.data, from.data, static_cast<std::size_t>(from.bytes()));
}

void add_into(Device& device, TypedSpan acc, TypedSpan add) {
  check_same(acc, add, "add");
  device.add(acc.data, add.data, acc.dtype, acc.elems);
}

}  // namespace zl
