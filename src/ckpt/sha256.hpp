// sha256.hpp — SHA-256 (FIPS 180-4), fed in pieces, for the checksums a checkpoint manifest keeps
// of its files.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

namespace zl {

/// A SHA-256 digest: 32 bytes.
using Sha256Digest = std::array<std::uint8_t, 32>;

/// SHA-256 of a byte stream given in pieces of any size: update() as often as needed, then
/// finish() once.
class Sha256 {
 public:
  Sha256();
  /// Hashes `bytes` after everything given so far.
  void update(std::span<const std::byte> bytes);
  /// Pads, hashes the last block and returns the digest; the object must not be used after.
  Sha256Digest finish();

 private:
  void compress(const std::uint8_t* block);

  std::array<std::uint32_t, 8> state_;
  std::array<std::uint8_t, 64> block_{};
  std::size_t block_bytes_ = 0;    ///< bytes waiting in block_
  std::uint64_t total_bytes_ = 0;  ///< message length so far
};

/// The digest as 64 lowercase hex digits.
std::string to_hex(const Sha256Digest& digest);

/// SHA-256 of `bytes`, as 64 lowercase hex digits.
std::string sha256_hex(std::span<const std::byte> bytes);

/// SHA-256 of the whole file at `path`, read in 1 MiB pieces, as 64 lowercase hex digits. Throws
/// zl::Error naming the file if it cannot be read.
std::string sha256_file_hex(const std::filesystem::path& path);

}  // namespace zl
