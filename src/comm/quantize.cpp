// quantize.cpp — block-wise symmetric int8/int4 quantization: scales, codes and their bytes.
#include "comm/quantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "core/error.hpp"

namespace zl {

namespace {

// Bytes a block of `elems` codes takes.
std::int64_t code_bytes(std::int64_t elems, QuantBits bits) {
  return bits == QuantBits::Int8 ? elems : (elems + 1) / 2;
}

std::int64_t block_count(std::int64_t elems, std::int64_t block_elems) {
  return (elems + block_elems - 1) / block_elems;
}

void check_block(std::int64_t block_elems) {
  ZL_CHECK(block_elems >= 2 && block_elems % 2 == 0,
           "a quantization block of {} elements is invalid: use an even number, 2 or more",
           block_elems);
}

// The scale of one block: amax / Q rounded to fp32, NaN when the block is not finite.
float block_scale(std::span<const float> block, int max_code) {
  float amax = 0.0f;
  for (const float v : block) {
    if (!std::isfinite(v)) return std::numeric_limits<float>::quiet_NaN();
    amax = std::max(amax, std::fabs(v));
  }
  return static_cast<float>(static_cast<double>(amax) / max_code);
}

// The code of `value` in a block of `scale` (finite, > 0).
int code_of(float value, float scale, int max_code) {
  const double quotient = std::nearbyint(static_cast<double>(value) / scale);
  return static_cast<int>(
      std::clamp(quotient, -static_cast<double>(max_code), static_cast<double>(max_code)));
}

}  // namespace

std::string_view quant_bits_name(QuantBits bits) {
  return bits == QuantBits::Int8 ? "int8" : "int4";
}

int quant_max_code(QuantBits bits) {
  return bits == QuantBits::Int8 ? 127 : 7;
}

std::int64_t quantized_bytes(std::int64_t elems, std::int64_t block_elems, QuantBits bits) {
  check_block(block_elems);
  const std::int64_t blocks = block_count(elems, block_elems);
  const std::int64_t full_blocks = elems / block_elems;
  const std::int64_t tail = elems - full_blocks * block_elems;
  return blocks * static_cast<std::int64_t>(sizeof(float)) +
         full_blocks * code_bytes(block_elems, bits) + code_bytes(tail, bits);
}

void quantize_blocks(std::span<const float> values, std::int64_t block_elems, QuantBits bits,
                     std::span<std::byte> out) {
  const auto elems = static_cast<std::int64_t>(values.size());
  ZL_CHECK(static_cast<std::int64_t>(out.size()) == quantized_bytes(elems, block_elems, bits),
           "quantizing {} values into {} bytes: expected {}", elems, out.size(),
           quantized_bytes(elems, block_elems, bits));
  const int max_code = quant_max_code(bits);
  const std::int64_t blocks = block_count(elems, block_elems);
  std::byte* codes = out.data() + blocks * static_cast<std::int64_t>(sizeof(float));
  for (std::int64_t b = 0; b < blocks; ++b) {
    const std::int64_t first = b * block_elems;
    const std::span<const float> block =
        values.subspan(static_cast<std::size_t>(first),
                       static_cast<std::size_t>(std::min(block_elems, elems - first)));
    const float scale = block_scale(block, max_code);
    std::memcpy(out.data() + b * static_cast<std::int64_t>(sizeof(float)), &scale, sizeof scale);
    const bool coded = std::isfinite(scale) && scale > 0.0f;
    const auto n = static_cast<std::int64_t>(block.size());
    for (std::int64_t i = 0; i < n; ++i) {
      const int code = coded ? code_of(block[static_cast<std::size_t>(i)], scale, max_code) : 0;
      if (bits == QuantBits::Int8) {
        codes[i] = static_cast<std::byte>(static_cast<std::int8_t>(code));
      } else {
        const auto nibble = static_cast<unsigned>(code) & 0xFu;
        auto& byte = codes[i / 2];
        byte = i % 2 == 0 ? static_cast<std::byte>(nibble)
                          : byte | static_cast<std::byte>(nibble << 4);
      }
    }
    codes += code_bytes(n, bits);
  }
}

void dequantize_blocks(std::span<const std::byte> in, std::int64_t block_elems, QuantBits bits,
                       std::span<float> values) {
  const auto elems = static_cast<std::int64_t>(values.size());
  ZL_CHECK(static_cast<std::int64_t>(in.size()) == quantized_bytes(elems, block_elems, bits),
           "dequantizing {} values from {} bytes: expected {}", elems, in.size(),
           quantized_bytes(elems, block_elems, bits));
  const std::int64_t blocks = block_count(elems, block_elems);
  const std::byte* codes = in.data() + blocks * static_cast<std::int64_t>(sizeof(float));
  for (std::int64_t b = 0; b < blocks; ++b) {
    float scale = 0.0f;
    std::memcpy(&scale, in.data() + b * static_cast<std::int64_t>(sizeof(float)), sizeof scale);
    const std::int64_t first = b * block_elems;
    const std::int64_t n = std::min(block_elems, elems - first);
    for (std::int64_t i = 0; i < n; ++i) {
      int code = 0;
      if (bits == QuantBits::Int8) {
        code = static_cast<std::int8_t>(codes[i]);
      } else {
        const auto byte = std::to_integer<unsigned>(codes[i / 2]);
        const unsigned nibble = i % 2 == 0 ? byte & 0xFu : byte >> 4;
        code = static_cast<int>(nibble) - (nibble >= 8u ? 16 : 0);  // 4-bit two's complement
      }
      values[static_cast<std::size_t>(first + i)] = static_cast<float>(code) * scale;
    }
    codes += code_bytes(n, bits);
  }
}

double quantization_error_bound(double amax, QuantBits bits) {
  return amax / (2.0 * quant_max_code(bits)) + amax * std::ldexp(1.0, -22) + std::ldexp(1.0, -140);
}

}  // namespace zl
