// typed_span.cpp — slicing, widening, rounding, copying and adding typed spans.
#include "engines/typed_span.hpp"

#include <cstddef>
#include <vector>

#include "core/host_convert.hpp"

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
  ZL_CHECK(is_training_dtype(out.dtype), "upload fp32 values into {}", dtype_name(out.dtype));
  std::vector<std::byte> rounded(static_cast<std::size_t>(out.bytes()));
  convert_on_host(host.data(), DType::F32, rounded.data(), out.dtype, out.elems);
  device.copy_from_host(out.data, rounded.data(), rounded.size());
}

void download_widened(Device& device, TypedSpan in, std::span<float> out) {
  ZL_CHECK(static_cast<std::int64_t>(out.size()) == in.elems, "download {} elements into {}",
           in.elems, out.size());
  if (in.dtype == DType::F32) {
    device.copy_to_host(out.data(), in.data, out.size_bytes());
    return;
  }
  std::vector<std::byte> bytes(static_cast<std::size_t>(in.bytes()));
  device.copy_to_host(bytes.data(), in.data, bytes.size());
  convert_on_host(bytes.data(), in.dtype, out.data(), DType::F32, in.elems);
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
