// safetensors.hpp — reading and writing the safetensors format (Hugging Face): an 8-byte
// little-endian header length N, N bytes of JSON naming each tensor's dtype, shape and byte range,
// then the raw little-endian data. Writes are atomic; reads validate everything they trust.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/buffer.hpp"
#include "core/dtype.hpp"

namespace zl {

/// One named tensor as stored in a file: dtype, shape and its raw little-endian bytes.
struct TensorRecord {
  std::string name;              ///< unique, non-empty key of the tensor in the file's header
  DType dtype = DType::F32;      ///< element type as stored (F32, BF16, F16, F64 or I64)
  Shape shape;                   ///< dimensions, outermost first
  std::vector<std::byte> bytes;  ///< numel(shape) * dtype_bytes(dtype) bytes, little-endian
};

/// A whole safetensors file: tensors in data order, and the string-to-string `__metadata__`.
struct SafetensorsFile {
  std::vector<TensorRecord> tensors;            ///< in the order of their data offsets
  std::map<std::string, std::string> metadata;  ///< `__metadata__`; empty when the file has none
};

/// An F32 record holding a copy of `values`; throws zl::Error unless numel(shape) == values.size().
TensorRecord make_tensor(std::string name, Shape shape, std::span<const float> values);

/// An I64 record holding a copy of `values`; throws zl::Error unless numel(shape) == values.size().
TensorRecord make_tensor(std::string name, Shape shape, std::span<const std::int64_t> values);

/// The elements of an F32 record; throws zl::Error naming the tensor if its dtype is not F32.
std::vector<float> to_floats(const TensorRecord& record);

/// The elements of an I64 record; throws zl::Error naming the tensor if its dtype is not I64.
std::vector<std::int64_t> to_int64s(const TensorRecord& record);

/// The record called `name`; throws zl::Error listing what is there if there is none.
const TensorRecord& find_tensor(const std::vector<TensorRecord>& tensors, std::string_view name);

/// "F32", "BF16", "F16", "F64" or "I64": the dtype as the safetensors header spells it.
std::string_view safetensors_dtype(DType dtype);

/// The DType a safetensors header's dtype string names, or nothing for one zerolab does not read.
std::optional<DType> parse_safetensors_dtype(std::string_view text);

/// numel(shape) * dtype_bytes(dtype), or nothing for a negative dimension or a 64-bit overflow.
std::optional<std::uint64_t> tensor_bytes(const Shape& shape, DType dtype);

/// Writes `tensors` (data in the order given) and `metadata` to `path` atomically: to
/// `<path>.tmp.<pid>` in the same directory, fsync, then rename over `path`. On any failure the
/// temporary is removed, `path` is untouched and a one-line zl::Error says what to do. Names must
/// be unique and non-empty, and each record's bytes must match its shape and dtype.
void write_safetensors(const std::filesystem::path& path, const std::vector<TensorRecord>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// Reads and validates a whole file (sizes, JSON, dtypes, shapes, offsets, names); every problem is
/// a one-line zl::Error naming the file. Tensors come back in the order of their data offsets.
SafetensorsFile read_safetensors_file(const std::filesystem::path& path);

/// The tensors of read_safetensors_file(path).
std::vector<TensorRecord> read_safetensors(const std::filesystem::path& path);

/// Where one tensor lies in a safetensors file, as its header says; no data read.
struct TensorLocation {
  std::string name;                ///< key in the header
  DType dtype = DType::F32;        ///< element type as stored
  Shape shape;                     ///< dimensions, outermost first
  std::uint64_t offset_bytes = 0;  ///< from the start of the file
  std::uint64_t size_bytes = 0;    ///< numel(shape) * dtype_bytes(dtype)
};

/// A safetensors file's header: its tensors in data order and its `__metadata__`.
struct SafetensorsIndex {
  std::filesystem::path path;                   ///< the file the header was read from
  std::uint64_t file_bytes = 0;                 ///< its size in bytes when the header was read
  std::vector<TensorLocation> tensors;          ///< in data order
  std::map<std::string, std::string> metadata;  ///< `__metadata__`; empty when the file has none
};

/// Reads and validates only the header of the file at `path`: everything read_safetensors_file
/// checks except reading the data. Every problem is a one-line zl::Error naming the file.
SafetensorsIndex read_safetensors_index(const std::filesystem::path& path);

/// Reads the one tensor called `name` from the file `index` describes, without the others; throws
/// zl::Error naming the file if it has no such tensor or came up short.
TensorRecord read_tensor(const SafetensorsIndex& index, std::string_view name);

}  // namespace zl
