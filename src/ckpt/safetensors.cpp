// safetensors.cpp — tensor records, safetensors dtype names and the writer: header JSON padded with
// spaces to 8 bytes, then the data, written atomically (core/atomic_file.hpp).
#include "ckpt/safetensors.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <utility>

#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace zl {

// Tensor bytes are written from memory as they are, and safetensors is little-endian.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

namespace {

using Json = nlohmann::ordered_json;  // keeps the header's key order: tensors in the order given

// The header: tensors in the order given with back-to-back offsets, padded with spaces to 8 bytes.
std::string header_text(const std::string& shown, const std::vector<TensorRecord>& tensors,
                        const std::map<std::string, std::string>& metadata) {
  Json header = Json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::set<std::string_view> names;
  std::uint64_t offset = 0;
  for (const auto& tensor : tensors) {
    ZL_CHECK(!tensor.name.empty() && tensor.name != "__metadata__",
             "cannot write {}: tensor name {:?} is empty or reserved: rename the tensor", shown,
             tensor.name);
    ZL_CHECK(names.insert(tensor.name).second,
             "cannot write {}: tensor {:?} appears twice: give each tensor a unique name", shown,
             tensor.name);
    ZL_CHECK(std::ranges::all_of(tensor.shape, [](std::int64_t dim) { return dim >= 0; }),
             "cannot write {}: tensor {:?} has shape {} with a negative dimension", shown,
             tensor.name, shape_string(tensor.shape));
    const auto expected_bytes = tensor_bytes(tensor.shape, tensor.dtype);
    ZL_CHECK(expected_bytes == tensor.bytes.size(),
             "cannot write {}: tensor {:?} holds {} bytes but shape {} of {} needs {}: fix the "
             "record",
             shown, tensor.name, tensor.bytes.size(), shape_string(tensor.shape),
             dtype_name(tensor.dtype), expected_bytes.value_or(0));
    Json& entry = header[tensor.name];
    entry["dtype"] = safetensors_dtype(tensor.dtype);
    entry["shape"] = tensor.shape;
    entry["data_offsets"] = {offset, offset + tensor.bytes.size()};
    offset += tensor.bytes.size();
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const Json::exception&) {
    fail("cannot write {}: a tensor name or metadata string is not valid UTF-8: fix it", shown);
  }
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

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
  const std::string header = header_text(path.string(), tensors, metadata);
  std::byte length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = std::byte((header.size() >> (8 * i)) & 0xff);
  std::vector<std::span<const std::byte>> pieces = {length_bytes, std::as_bytes(std::span(header))};
  for (const auto& tensor : tensors) pieces.emplace_back(tensor.bytes);
  write_file_atomically(path, pieces);
}

}  // namespace zl
