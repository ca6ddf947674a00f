// safetensors_stream.cpp — the streaming safetensors writer: the header from names, dtypes and
// shapes (offsets back to back, padded with spaces to 8 bytes, as write_safetensors lays it out),
// then each tensor's bytes through an AtomicFile.
#include "ckpt/safetensors_stream.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "ckpt/safetensors.hpp"
#include "core/error.hpp"

namespace zl {

namespace {

using Json = nlohmann::ordered_json;  // keeps the tensors in the order given

// The header text for `tensors` with back-to-back offsets, padded with spaces to 8 bytes.
std::string header_of(const std::string& shown, const std::vector<TensorInfo>& tensors,
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
    const auto bytes = tensor_bytes(tensor.shape, tensor.dtype);
    ZL_CHECK(bytes.has_value(),
             "cannot write {}: tensor {:?} has shape {} with a negative or too large dimension",
             shown, tensor.name, shape_string(tensor.shape));
    Json& entry = header[tensor.name];
    entry["dtype"] = safetensors_dtype(tensor.dtype);
    entry["shape"] = tensor.shape;
    entry["data_offsets"] = {offset, offset + *bytes};
    offset += *bytes;
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

SafetensorsStreamWriter::SafetensorsStreamWriter(const std::filesystem::path& path,
                                                 std::vector<TensorInfo> tensors,
                                                 const std::map<std::string, std::string>& metadata,
                                                 BytesObserver observer)
    : path_(path), tensors_(std::move(tensors)), observer_(std::move(observer)), file_(path) {
  const std::string header = header_of(path_.string(), tensors_, metadata);
  std::byte length_bytes[8];
  for (int i = 0; i < 8; ++i) length_bytes[i] = std::byte((header.size() >> (8 * i)) & 0xff);
  append(length_bytes);
  append(std::as_bytes(std::span(header)));
}

void SafetensorsStreamWriter::append(std::span<const std::byte> bytes) {
  file_.write(bytes);
  if (observer_) observer_(bytes);
  written_bytes_ += bytes.size();
}

void SafetensorsStreamWriter::write_tensor(std::string_view name,
                                           std::span<const std::byte> bytes) {
  ZL_CHECK(next_tensor_ < tensors_.size(),
           "cannot write {}: tensor {:?} is past the {} in the header", path_.string(), name,
           tensors_.size());
  const TensorInfo& next = tensors_[next_tensor_];
  ZL_CHECK(next.name == name, "cannot write {}: tensor {:?} given where the header has {:?} next",
           path_.string(), name, next.name);
  ZL_CHECK(tensor_bytes(next.shape, next.dtype) == bytes.size(),
           "cannot write {}: tensor {:?} given {} bytes but shape {} of {} needs {}",
           path_.string(), name, bytes.size(), shape_string(next.shape), dtype_name(next.dtype),
           tensor_bytes(next.shape, next.dtype).value_or(0));
  append(bytes);
  ++next_tensor_;
}

std::uint64_t SafetensorsStreamWriter::commit() {
  ZL_CHECK(next_tensor_ == tensors_.size(),
           "cannot write {}: only {} of its {} tensors were written", path_.string(), next_tensor_,
           tensors_.size());
  file_.commit();
  return written_bytes_;
}

}  // namespace zl
