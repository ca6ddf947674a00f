// rng.cpp — Philox4x32-10 and the distributions zerolab draws from it.
#include "core/rng.hpp"

#include <cmath>
#include <numbers>

namespace zl {

namespace {

constexpr std::uint32_t kMul0 = 0xD2511F53u;
constexpr std::uint32_t kMul1 = 0xCD9E8D57u;
constexpr std::uint32_t kWeyl0 = 0x9E3779B9u;
constexpr std::uint32_t kWeyl1 = 0xBB67AE85u;

void mul_hi_lo(std::uint32_t a, std::uint32_t b, std::uint32_t& hi, std::uint32_t& lo) {
  const std::uint64_t product = static_cast<std::uint64_t>(a) * b;
  hi = static_cast<std::uint32_t>(product >> 32);
  lo = static_cast<std::uint32_t>(product);
}

}  // namespace

std::array<std::uint32_t, 4> philox4x32(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  std::array<std::uint32_t, 4> c = {static_cast<std::uint32_t>(index), static_cast<std::uint32_t>(index >> 32),
                                    static_cast<std::uint32_t>(stream), static_cast<std::uint32_t>(stream >> 32)};
  std::uint32_t k0 = static_cast<std::uint32_t>(seed);
  std::uint32_t k1 = static_cast<std::uint32_t>(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    std::uint32_t hi0, lo0, hi1, lo1;
    mul_hi_lo(kMul0, c[0], hi0, lo0);
    mul_hi_lo(kMul1, c[2], hi1, lo1);
    c = {hi1 ^ c[1] ^ k0, lo1, hi0 ^ c[3] ^ k1, lo0};
    k0 += kWeyl0;
    k1 += kWeyl1;
  }
  return c;
}

float uniform01(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  const std::uint32_t bits = philox4x32(seed, stream, index)[0] >> 8;
  return static_cast<float>(bits) * 0x1.0p-24f;
}

float standard_normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  const auto r = philox4x32(seed, stream, index);
  // u1 in (0, 1] so the log is finite; u2 in [0, 1).
  const double u1 = (static_cast<double>(r[0] >> 8) + 1.0) * 0x1.0p-24;
  const double u2 = static_cast<double>(r[1] >> 8) * 0x1.0p-24;
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2));
}

std::uint64_t uniform_below(std::uint64_t seed, std::uint64_t stream, std::uint64_t index, std::uint64_t n) {
  const auto r = philox4x32(seed, stream, index);
  const std::uint64_t wide = (static_cast<std::uint64_t>(r[2]) << 32) | r[3];
  return wide % n;
}

std::uint64_t stream_of(std::string_view name) {
  std::uint64_t hash = 0xCBF29CE484222325ull;
  for (const char ch : name) {
    hash ^= static_cast<unsigned char>(ch);
    hash *= 0x100000001B3ull;
  }
  return hash;
}

}  // namespace zl
