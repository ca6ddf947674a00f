// safetensors_stream.hpp — writing a safetensors file tensor by tensor: the header is computed up
// front from names, dtypes and shapes, then each tensor's bytes are appended in order, so a file
// larger than memory can be written holding one tensor at a time. Atomic like write_safetensors.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core/atomic_file.hpp"
#include "core/buffer.hpp"
#include "core/dtype.hpp"

namespace zl {

/// What a safetensors header says about one tensor, before its bytes exist.
struct TensorInfo {
  std::string name;          ///< unique, non-empty, not "__metadata__"
  DType dtype = DType::F32;  ///< element type as stored
  Shape shape;               ///< dimensions; write_tensor() must then give numel * dtype bytes
};

/// Called with every byte the writer writes, in file order (e.g. to hash the file as it goes).
using BytesObserver = std::function<void(std::span<const std::byte>)>;

/// A safetensors file written in pieces: the constructor writes the header for `tensors` (data in
/// the order given), write_tensor() appends each tensor's bytes in that order, commit() renames the
/// file into place. Destroyed before commit(), it leaves `path` as it was (core/atomic_file.hpp).
class SafetensorsStreamWriter {
 public:
  /// Throws zl::Error naming `path` if a name is empty, reserved or repeated, or a shape is bad.
  SafetensorsStreamWriter(const std::filesystem::path& path, std::vector<TensorInfo> tensors,
                          const std::map<std::string, std::string>& metadata = {},
                          BytesObserver observer = {});
  /// Appends the bytes of the next tensor, which must be called `name` and hold exactly the bytes
  /// its dtype and shape need.
  void write_tensor(std::string_view name, std::span<const std::byte> bytes);
  /// Checks every tensor was written, then flushes and renames; returns the file size in bytes.
  std::uint64_t commit();

 private:
  void append(std::span<const std::byte> bytes);

  std::filesystem::path path_;
  std::vector<TensorInfo> tensors_;
  std::size_t next_tensor_ = 0;
  std::uint64_t written_bytes_ = 0;
  BytesObserver observer_;
  AtomicFile file_;
};

}  // namespace zl
