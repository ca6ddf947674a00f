// sha256.cpp — SHA-256 as FIPS 180-4 section 6.2 writes it: 64-byte blocks, a 64-entry message
// schedule, 64 rounds; the message padded with 0x80, zeros and its bit length (big-endian).
#include "ckpt/sha256.hpp"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.hpp"

namespace zl {

namespace {

// First 32 bits of the fractional parts of the cube roots of the first 64 primes (FIPS
// 180-4 4.2.2).
constexpr std::array<std::uint32_t, 64> kRoundConstants = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

// First 32 bits of the fractional parts of the square roots of the first 8 primes (5.3.3).
constexpr std::array<std::uint32_t, 8> kInitialState = {
    0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};

constexpr std::size_t kFileChunkBytes = std::size_t{1} << 20;

}  // namespace

Sha256::Sha256() : state_(kInitialState) {}

void Sha256::compress(const std::uint8_t* block) {
  // w is the message schedule (6.2.2 step 1): 16 big-endian words, then 48 mixed from them.
  std::array<std::uint32_t, 64> w;
  for (int t = 0; t < 16; ++t) {
    w[t] = (std::uint32_t{block[4 * t]} << 24) | (std::uint32_t{block[4 * t + 1]} << 16) |
           (std::uint32_t{block[4 * t + 2]} << 8) | std::uint32_t{block[4 * t + 3]};
  }
  for (int t = 16; t < 64; ++t) {
    const std::uint32_t s0 = std::rotr(w[t - 15], 7) ^ std::rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
    const std::uint32_t s1 = std::rotr(w[t - 2], 17) ^ std::rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
    w[t] = w[t - 16] + s0 + w[t - 7] + s1;
  }
  auto [a, b, c, d, e, f, g, h] = state_;
  for (int t = 0; t < 64; ++t) {
    const std::uint32_t big_s1 = std::rotr(e, 6) ^ std::rotr(e, 11) ^ std::rotr(e, 25);
    const std::uint32_t choose = (e & f) ^ (~e & g);
    const std::uint32_t t1 = h + big_s1 + choose + kRoundConstants[t] + w[t];
    const std::uint32_t big_s0 = std::rotr(a, 2) ^ std::rotr(a, 13) ^ std::rotr(a, 22);
    const std::uint32_t majority = (a & b) ^ (a & c) ^ (b & c);
    const std::uint32_t t2 = big_s0 + majority;
    h = g;
    g = f;
    f = e;
    e = d + t1;
    d = c;
    c = b;
    b = a;
    a = t1 + t2;
  }
  const std::array<std::uint32_t, 8> round_out = {a, b, c, d, e, f, g, h};
  for (int i = 0; i < 8; ++i) state_[i] += round_out[i];
}

void Sha256::update(std::span<const std::byte> bytes) {
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  std::size_t left = bytes.size();
  total_bytes_ += left;
  if (block_bytes_ > 0) {
    const std::size_t take = std::min(left, block_.size() - block_bytes_);
    std::memcpy(block_.data() + block_bytes_, data, take);
    block_bytes_ += take;
    data += take;
    left -= take;
    if (block_bytes_ < block_.size()) return;
    compress(block_.data());
    block_bytes_ = 0;
  }
  for (; left >= block_.size(); data += block_.size(), left -= block_.size()) compress(data);
  if (left > 0) std::memcpy(block_.data(), data, left);
  block_bytes_ = left;
}

Sha256Digest Sha256::finish() {
  // Padding (5.1.1): 0x80, zeros up to 56 bytes mod 64, then the length in bits, big-endian.
  const std::uint64_t total_bits = total_bytes_ * 8;
  std::array<std::byte, 72> padding{};
  padding[0] = std::byte{0x80};
  const std::size_t zeros = (block_bytes_ < 56 ? 56 : 120) - block_bytes_ - 1;
  for (int i = 0; i < 8; ++i) padding[1 + zeros + i] = std::byte(total_bits >> (56 - 8 * i));
  update(std::span(padding.data(), 1 + zeros + 8));
  Sha256Digest digest;
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 4; ++j)
      digest[4 * i + j] = static_cast<std::uint8_t>(state_[i] >> (24 - 8 * j));
  }
  return digest;
}

std::string to_hex(const Sha256Digest& digest) {
  constexpr char kDigits[] = "0123456789abcdef";
  std::string hex;
  for (const std::uint8_t byte : digest) {
    hex += kDigits[byte >> 4];
    hex += kDigits[byte & 0xf];
  }
  return hex;
}

std::string sha256_hex(std::span<const std::byte> bytes) {
  Sha256 hash;
  hash.update(bytes);
  return to_hex(hash.finish());
}

std::string sha256_file_hex(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {}: {}: check the path", path.string(), std::strerror(errno));
  Sha256 hash;
  std::vector<std::byte> chunk(kFileChunkBytes);
  while (in) {
    in.read(reinterpret_cast<char*>(chunk.data()), static_cast<std::streamsize>(chunk.size()));
    hash.update(std::span(chunk.data(), static_cast<std::size_t>(in.gcount())));
  }
  ZL_CHECK(in.eof(), "cannot read {}: reading failed before the end: check the disk",
           path.string());
  return to_hex(hash.finish());
}

}  // namespace zl
