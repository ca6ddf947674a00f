// quantize.hpp — ZeRO++'s block-wise symmetric quantization, the one definition its quantized
// collectives use (qwZ's int8 weights, qgZ's int4 gradients). Values are cut into blocks of
// `block_elems` from the start of the array (the last one may be shorter); for each block, with
// amax its largest magnitude and Q the largest code (127 for int8, 7 for int4):
//   scale = amax / Q                     (fp32, rounded once; 0 for an all-zero block)
//   code  = round-half-even(x / scale)   (the quotient in double), in -Q .. Q
//   x'    = code * scale                 (fp32, rounded once)
// A block holding an infinity or a NaN gets a NaN scale, so every one of its values comes back
// NaN: an overflow still reaches the loss scaler and the clipping as a non-finite value.
// The bytes of a quantized array: every block's scale (fp32, in block order), then every block's
// codes (int8: a byte each; int4: two a byte, the even element in the low nibble, each block
// starting on a byte).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace zl {

/// Bits a quantized value takes: 8 (qwZ's weights) or 4 (qgZ's gradients).
enum class QuantBits : std::uint8_t { Int4 = 4, Int8 = 8 };

/// "int4" or "int8".
std::string_view quant_bits_name(QuantBits bits);

/// The largest code magnitude Q: 7 for int4, 127 for int8.
int quant_max_code(QuantBits bits);

/// Bytes `elems` values take quantized in blocks of `block_elems` (>= 2 and even): one fp32
/// scale a block and the blocks' codes.
std::int64_t quantized_bytes(std::int64_t elems, std::int64_t block_elems, QuantBits bits);

/// Quantizes `values` into `out`, which holds quantized_bytes(values.size(), ...) bytes.
void quantize_blocks(std::span<const float> values, std::int64_t block_elems, QuantBits bits,
                     std::span<std::byte> out);

/// The values `in` (quantize_blocks' bytes for values.size() elements) stands for, into `values`.
void dequantize_blocks(std::span<const std::byte> in, std::int64_t block_elems, QuantBits bits,
                       std::span<float> values);

/// The most a finite value of a block whose largest magnitude is `amax` moves through
/// quantize_blocks and dequantize_blocks: half a step, amax / (2Q), plus amax * 2^-22 for the
/// fp32 roundings of the scale, the quotient and the product, plus 2^-140 where the scale is
/// subnormal.
double quantization_error_bound(double amax, QuantBits bits);

}  // namespace zl
