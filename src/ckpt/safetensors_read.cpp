// safetensors_read.cpp — the validating safetensors reader: checks the header length against the
// file, the JSON, every dtype, shape and byte range, before reading each tensor's bytes (all of
// them, or one tensor through the header index).
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "ckpt/safetensors.hpp"
#include "core/error.hpp"

namespace zl {

// Tensor bytes are read into memory as they are, and safetensors is little-endian.
static_assert(std::endian::native == std::endian::little,
              "safetensors I/O assumes a little-endian host");

namespace {

using Json = nlohmann::ordered_json;  // keeps the header's key order (ties in data order)

// A header longer than this is not a checkpoint (the Rust reference reader uses the same limit).
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

// Reads exactly `size` bytes at `offset`; false if the file ends first or the read fails.
bool read_at(std::ifstream& in, std::uint64_t offset, void* data, std::size_t size) {
  in.seekg(static_cast<std::streamoff>(offset));
  in.read(static_cast<char*>(data), static_cast<std::streamsize>(size));
  return in.good() && static_cast<std::size_t>(in.gcount()) == size;
}

// A tensor's header entry, before its bytes are read.
struct Entry {
  TensorRecord record;
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
};

// Parses one tensor's header entry, checking dtype, shape and offsets against the data section.
Entry parse_entry(const std::string& shown, const std::string& name, const Json& info,
                  std::uint64_t data_bytes) {
  const auto bad = [&](std::string_view what) {
    fail("cannot read {}: tensor {:?} {}: the file is corrupted or not safetensors", shown, name,
         what);
  };
  if (!info.is_object()) bad("is not a JSON object");
  const auto dtype_it = info.find("dtype");
  const auto shape_it = info.find("shape");
  const auto offsets_it = info.find("data_offsets");
  if (dtype_it == info.end() || !dtype_it->is_string()) bad("has no \"dtype\" string");
  if (shape_it == info.end() || !shape_it->is_array()) bad("has no \"shape\" array");
  if (offsets_it == info.end() || !offsets_it->is_array() || offsets_it->size() != 2 ||
      !(*offsets_it)[0].is_number_unsigned() || !(*offsets_it)[1].is_number_unsigned()) {
    bad("has no \"data_offsets\" pair of non-negative integers");
  }
  Entry entry;
  entry.record.name = name;
  const auto& dtype_text = dtype_it->get_ref<const std::string&>();
  const auto dtype = parse_safetensors_dtype(dtype_text);
  ZL_CHECK(dtype.has_value(),
           "cannot read {}: tensor {:?} has dtype {:?}, which zerolab does not read (it reads F32, "
           "BF16, F16, F64, I64): convert the tensor",
           shown, name, dtype_text);
  entry.record.dtype = *dtype;
  for (const auto& dim : *shape_it) {
    if (!dim.is_number_unsigned() || dim.get<std::uint64_t>() > INT64_MAX) {
      bad("has a shape entry that is not a non-negative 64-bit integer");
    }
    entry.record.shape.push_back(dim.get<std::int64_t>());
  }
  entry.begin = (*offsets_it)[0].get<std::uint64_t>();
  entry.end = (*offsets_it)[1].get<std::uint64_t>();
  ZL_CHECK(entry.begin <= entry.end && entry.end <= data_bytes,
           "cannot read {}: tensor {:?} has data_offsets [{}, {}] outside the {}-byte data "
           "section: the file is truncated or corrupted",
           shown, name, entry.begin, entry.end, data_bytes);
  const auto expected_bytes = tensor_bytes(entry.record.shape, entry.record.dtype);
  ZL_CHECK(expected_bytes == entry.end - entry.begin,
           "cannot read {}: tensor {:?} spans {} bytes but shape {} of {} needs {}: the file is "
           "corrupted",
           shown, name, entry.end - entry.begin, shape_string(entry.record.shape),
           dtype_name(entry.record.dtype), expected_bytes.value_or(0));
  return entry;
}

// Parses the header JSON, failing on malformed text and on a tensor name given twice.
Json parse_header(const std::string& shown, const std::string& text) {
  std::string duplicate;
  std::set<std::string> names;
  const Json::parser_callback_t note_duplicates = [&](int depth, Json::parse_event_t event,
                                                      Json& parsed) {
    if (event == Json::parse_event_t::key && depth == 1 && duplicate.empty() &&
        !names.insert(parsed.get<std::string>()).second) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  Json header;
  try {
    header = Json::parse(text, note_duplicates);
  } catch (const Json::parse_error& error) {
    fail(
        "cannot read {}: header JSON is malformed near byte {}: the file is corrupted or not "
        "safetensors",
        shown, error.byte);
  } catch (const Json::out_of_range&) {  // a number beyond every C++ type, e.g. 1e400
    fail("cannot read {}: header JSON has a number out of range: the file is corrupted or not "
         "safetensors",
         shown);
  }
  ZL_CHECK(duplicate.empty(),
           "cannot read {}: tensor {:?} appears twice in the header: the file is corrupted", shown,
           duplicate);
  ZL_CHECK(header.is_object(),
           "cannot read {}: header JSON is not an object: the file is not safetensors", shown);
  return header;
}

}  // namespace

SafetensorsIndex read_safetensors_index(const std::filesystem::path& path) {
  const std::string shown = path.string();
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {}: {}: check the path", shown, std::strerror(errno));
  std::error_code error;
  const std::uint64_t file_bytes = std::filesystem::file_size(path, error);
  if (error) fail("cannot read {}: {}: check the path", shown, error.message());
  const auto fail_read = [&](std::string_view what) {
    fail("cannot read {}: {} came up short: the file changed while being read or the disk failed",
         shown, what);
  };

  ZL_CHECK(file_bytes >= 8,
           "cannot read {}: file is {} bytes, too short for the 8-byte header length: the file is "
           "truncated or not safetensors",
           shown, file_bytes);
  unsigned char length_bytes[8];
  if (!read_at(in, 0, length_bytes, 8)) fail_read("reading the header length");
  std::uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = (header_bytes << 8) | length_bytes[i];
  ZL_CHECK(header_bytes <= file_bytes - 8,
           "cannot read {}: header length {} is larger than the file ({} bytes): the file is "
           "truncated or not safetensors",
           shown, header_bytes, file_bytes);
  ZL_CHECK(header_bytes <= kMaxHeaderBytes,
           "cannot read {}: header length {} exceeds the {}-byte limit: the file is not "
           "safetensors",
           shown, header_bytes, kMaxHeaderBytes);
  std::string text(header_bytes, '\0');
  if (!read_at(in, 8, text.data(), text.size())) fail_read("reading the header");
  const Json header = parse_header(shown, text);

  const std::uint64_t data_begin = 8 + header_bytes;
  const std::uint64_t data_bytes = file_bytes - data_begin;
  SafetensorsIndex result{path, file_bytes, {}, {}};
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name != "__metadata__") {
      entries.push_back(parse_entry(shown, name, value, data_bytes));
      continue;
    }
    ZL_CHECK(value.is_object(), "cannot read {}: __metadata__ is not a JSON object", shown);
    for (const auto& [key, text_value] : value.items()) {
      ZL_CHECK(text_value.is_string(), "cannot read {}: __metadata__ value of {:?} is not a string",
               shown, key);
      result.metadata[key] = text_value.get<std::string>();
    }
  }

  // The tensors' byte ranges must tile the data section: no overlap, no gap, nothing after.
  std::ranges::stable_sort(entries, {}, [](const Entry& e) { return std::pair(e.begin, e.end); });
  std::uint64_t covered = 0;
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const Entry& entry = entries[i];
    ZL_CHECK(entry.begin >= covered,
             "cannot read {}: tensors {:?} and {:?} overlap (data_offsets [{}, {}] and [{}, {}]): "
             "the file is corrupted",
             shown, entries[i - 1].record.name, entry.record.name, entries[i - 1].begin,
             entries[i - 1].end, entry.begin, entry.end);
    ZL_CHECK(entry.begin == covered,
             "cannot read {}: data bytes [{}, {}) before tensor {:?} belong to no tensor: the file "
             "is corrupted",
             shown, covered, entry.begin, entry.record.name);
    covered = entry.end;
  }
  ZL_CHECK(covered == data_bytes,
           "cannot read {}: the data section has {} bytes but the tensors cover {}: the file is "
           "corrupted",
           shown, data_bytes, covered);

  for (auto& entry : entries) {
    result.tensors.push_back({std::move(entry.record.name), entry.record.dtype,
                              std::move(entry.record.shape), data_begin + entry.begin,
                              entry.end - entry.begin});
  }
  return result;
}

namespace {

// Opens the file an index describes for reading tensors.
std::ifstream open_indexed(const SafetensorsIndex& index) {
  std::ifstream in(index.path, std::ios::binary);
  if (!in) fail("cannot read {}: {}: check the path", index.path.string(), std::strerror(errno));
  return in;
}

// The tensor at `location`, read from `in`.
TensorRecord read_located(std::ifstream& in, const SafetensorsIndex& index,
                          const TensorLocation& location) {
  TensorRecord record{location.name, location.dtype, location.shape,
                      std::vector<std::byte>(location.size_bytes)};
  ZL_CHECK(read_at(in, location.offset_bytes, record.bytes.data(), record.bytes.size()),
           "cannot read {}: reading tensor {:?} came up short: the file changed while being read "
           "or the disk failed",
           index.path.string(), location.name);
  return record;
}

}  // namespace

TensorRecord read_tensor(const SafetensorsIndex& index, std::string_view name) {
  const auto found = std::ranges::find(index.tensors, name, &TensorLocation::name);
  ZL_CHECK(found != index.tensors.end(), "cannot read {}: it has no tensor {:?}",
           index.path.string(), name);
  std::ifstream in = open_indexed(index);
  return read_located(in, index, *found);
}

SafetensorsFile read_safetensors_file(const std::filesystem::path& path) {
  const SafetensorsIndex index = read_safetensors_index(path);
  std::ifstream in = open_indexed(index);
  SafetensorsFile result{{}, index.metadata};
  for (const auto& location : index.tensors) {
    result.tensors.push_back(read_located(in, index, location));
  }
  return result;
}

std::vector<TensorRecord> read_safetensors(const std::filesystem::path& path) {
  return read_safetensors_file(path).tensors;
}

}  // namespace zl
