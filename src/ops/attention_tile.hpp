// attention_tile.hpp — what the CPU and CUDA devices' attention share so that both compute the
// same bits: the tile of 32 rows (a warp's lanes on the GPU), e^t in float from additions,
// multiplications and bit moves only, a probability from a score and its row's stats, and the
// order in which a tile's 32 values are summed or maxed (the GPU's shuffle tree as lane 0 sees
// it). Every operation is one IEEE float operation or an explicit fused multiply-add, with
// contraction off on both sides (-ffp-contract=off, nvcc --fmad=false), so a value is the same
// on every device, thread count and vector width.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/host_device.hpp"

namespace zl::attention_tile {

/// Rows of a tile: queries or keys, one per lane of a warp.
inline constexpr int kTile = 32;

/// e^t, within one ulp of the correctly rounded value for t in [-87, 88] (about 10% of the points
/// are one ulp off), by Cephes' expf: t = n ln2 + r by round-to-nearest through a magic constant,
/// e^r by a polynomial, 2^n put into the exponent bits. 0 below -87, where e^t leaves the normal
/// floats, and +inf above 88; NaN stays NaN.
ZL_HOST_DEVICE inline float exp_float(float t) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr float kLn2Hi = 0.693359375f;  // ln 2 = kLn2Hi - kLn2Lo, kLn2Hi exact in n ln 2
  constexpr float kLn2Lo = -2.12194440e-4f;
  constexpr float kRound = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const bool underflow = t<-87.0f, overflow = t> 88.0f;
  const float x = underflow ? -87.0f : (overflow ? 88.0f : t);
  const float shifted = x * kLog2e + kRound;  // its low mantissa bits hold n = round(x log2 e)
  const float n = shifted - kRound;
  const float r = (x - n * kLn2Hi) - n * kLn2Lo;  // |r| <= ln2 / 2
  const float p = (((((1.9875691500e-4f * r + 1.3981999507e-3f) * r + 8.3334519073e-3f) * r +
                     4.1665795894e-2f) *
                        r +
                    1.6666665459e-1f) *
                       r +
                   5.0000001201e-1f) *
                      (r * r) +
                  r + 1.0f;
  // 2^n: n + 127 in the exponent field (n in [-126, 127] is the low bits of `shifted`'s)
  const float scale = host_device::float_from_bits((host_device::bits_of(shifted) + 127u) << 23);
  const float value = p * scale;
  return underflow ? 0.0f : (overflow ? INFINITY : value);
}

/// The running max of a row's scores, as both devices update it: `b` replaces `a` only when it is
/// larger (so of +0 and -0, `a` stays, and a NaN `b` never replaces `a`), where fmaxf may differ
/// between libraries on zeros.
ZL_HOST_DEVICE inline float running_max(float a, float b) {
  return b > a ? b : a;
}

/// p = e^(score - m) / l: a probability from its score and its row's stats {m, l}, the row's
/// largest score and sum of exponentials. Forward's online softmax ends with exactly these m and
/// l, and backward rebuilds every probability this way.
ZL_HOST_DEVICE inline float probability(float score, float m, float l) {
  return exp_float(score - m) / l;
}

/// The sum of a tile's 32 values in the order of the GPU's shuffle tree (lane i adds lane
/// i + 16's value, then i + 8's, ..., then i + 1's; lane 0's result, which every lane gets).
/// `values` is overwritten.
inline float tile_sum(float* values) {
  for (int offset = kTile / 2; offset > 0; offset /= 2) {
    for (int i = 0; i < offset; ++i) values[i] = values[i] + values[i + offset];
  }
  return values[0];
}

/// The largest of a tile's 32 values as lane 0 of the GPU's shuffle tree finds it (a value is
/// replaced only by a larger one, so of +0 and -0 lane 0 keeps the one it holds). `values` is
/// overwritten.
inline float tile_max(float* values) {
  for (int offset = kTile / 2; offset > 0; offset /= 2) {
    for (int i = 0; i < offset; ++i) {
      values[i] = values[i + offset] > values[i] ? values[i + offset] : values[i];
    }
  }
  return values[0];
}

}  // namespace zl::attention_tile
