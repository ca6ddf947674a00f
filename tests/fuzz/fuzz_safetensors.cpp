// fuzz_safetensors.cpp — libFuzzer target for the safetensors reader: any bytes, as a file, must
// read back as tensors whose sizes match their shapes and dtypes, or fail with a one-line
// zl::Error; never a crash, an overflow, an out-of-bounds read or a huge allocation.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "ckpt/safetensors.hpp"
#include "core/error.hpp"

namespace {

// One scratch file per fuzzing process, in memory where /dev/shm exists, removed at exit.
class ScratchFile {
 public:
  ScratchFile() {
    const std::filesystem::path dir = std::filesystem::is_directory("/dev/shm")
                                          ? "/dev/shm"
                                          : std::filesystem::temp_directory_path();
    path_ = dir / ("zerolab-fuzz-safetensors-" + std::to_string(::getpid()) + ".safetensors");
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;
  ~ScratchFile() {
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
  }

  const std::filesystem::path& write(const std::uint8_t* data, std::size_t size) {
    std::ofstream out(path_, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    out.close();
    if (!out) std::abort();  // the harness itself failed, not the reader
    return path_;
  }

 private:
  std::filesystem::path path_;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static ScratchFile scratch;
  const std::filesystem::path& path = scratch.write(data, size);
  try {
    const zl::SafetensorsFile file = zl::read_safetensors_file(path);
    std::uint64_t total_bytes = 0;
    for (const auto& tensor : file.tensors) {
      // What the reader promises: every record's bytes are exactly its shape times its dtype.
      if (zl::tensor_bytes(tensor.shape, tensor.dtype) != tensor.bytes.size()) std::abort();
      total_bytes += tensor.bytes.size();
    }
    if (total_bytes > size) std::abort();  // data cannot come from nowhere
  } catch (const zl::Error& error) {
    if (std::strchr(error.what(), '\n') != nullptr) std::abort();  // errors are one line
  }
  return 0;
}
