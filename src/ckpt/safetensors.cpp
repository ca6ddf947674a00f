// safetensors.cpp — tensor records, safetensors dtype names, and write_safetensors (whole
// records through the streaming writer of safetensors_stream.hpp, so there is one header writer).
#include "ckpt/safetensors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <optional>
#include <utility>

#include "ckpt/safetensors_stream.hpp"
#include "core/error.hpp"

namespace zl {

// Tensor bytes are written from memory as they are, and safetensors is little-endian.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

TensorRecord make_tensor(std::string name, Shape shape, std::span<const float> values) {
  ZL_CHECK(numel(shape) == static_cast<std::int64_t>(values.size()),
           "tensor {:?} of shape {} given {} values", name, shape_string(shape), values.size());
  const auto bytes = std::as_bytes(values);
  return {std::move(name), DType::F32, std::move(shape), {bytes.begin(), bytes.end()}};
}

TensorRecord make_tensor(std::string name, Shape shape, std::span<const std::int64_t> values) {
  ZL_CHECK(numel(shape) == static_cast<std::int64_t>(values.size()),
           "tensor {:?} of shape {} given {} values", name, shape_string(shape), values.size());
  const auto bytes = std::as_bytes(values);
  return {std::move(name), DType::I64, std::move(shape), {bytes.begin(), bytes.end()}};
}

std::vector<float> to_floats(const TensorRecord& record) {
  ZL_CHECK(record.dtype == DType::F32, "tensor {:?} is {}, not fp32: convert it first", record.name,
           dtype_name(record.dtype));
  std::vector<float> values(record.bytes.size() / sizeof(float));
  std::memcpy(values.data(), record.bytes.data(), values.size() * sizeof(float));
  return values;
}

std::vector<std::int64_t> to_int64s(const TensorRecord& record) {
  ZL_CHECK(record.dtype == DType::I64, "tensor {:?} is {}, not int64", record.name,
           dtype_name(record.dtype));
  std::vector<std::int64_t> values(record.bytes.size() / sizeof(std::int64_t));
  std::memcpy(values.data(), record.bytes.data(), values.size() * sizeof(std::int64_t));
  return values;
}

const TensorRecord& find_tensor(const std::vector<TensorRecord>& tensors, std::string_view name) {
  const auto found = std::ranges::find(tensors, name, &TensorRecord::name);
  if (found != tensors.end()) return *found;
  std::string names;
  for (const auto& tensor : tensors) names += (names.empty() ? "" : ", ") + tensor.name;
  fail("no tensor named {:?}; there are {} tensors: {}", name, tensors.size(), names);
}

std::string_view safetensors_dtype(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return "F32";
    case DType::BF16:
      return "BF16";
    case DType::F16:
      return "F16";
    case DType::F64:
      return "F64";
    case DType::I64:
      return "I64";
    case DType::I8:
      return "I8";
  }
  fail("unknown DType {}", static_cast<int>(dtype));
}

std::optional<DType> parse_safetensors_dtype(std::string_view text) {
  for (const DType dtype : {DType::F32, DType::BF16, DType::F16, DType::F64, DType::I64}) {
    if (safetensors_dtype(dtype) == text) return dtype;
  }
  return std::nullopt;
}

std::optional<std::uint64_t> tensor_bytes(const Shape& shape, DType dtype) {
  std::uint64_t bytes = dtype_bytes(dtype);
  for (const auto dim : shape) {
    if (dim < 0 || __builtin_mul_overflow(bytes, static_cast<std::uint64_t>(dim), &bytes)) {
      return std::nullopt;
    }
  }
  return bytes;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorRecord>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  std::vector<TensorInfo> infos;
  for (const auto& tensor : tensors) infos.push_back({tensor.name, tensor.dtype, tensor.shape});
  SafetensorsStreamWriter writer(path, std::move(infos), metadata);
  for (const auto& tensor : tensors) writer.write_tensor(tensor.name, tensor.bytes);
  writer.commit();
}

}  // namespace zl
