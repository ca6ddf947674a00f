// gelu_tanh.hpp — GPT-2's GELU (the tanh approximation) and its derivative, per element, in
// double, for the CPU and CUDA devices alike (one header, so both run the same algorithm).
//   GELU(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
// is computed as x * sigmoid(2u), and tanh's derivative 1 - tanh(u)^2 as 4 s (1 - s) with
// s = sigmoid(2u): both sigmoids come from one e^(-2|u|), so nothing subtracts nearly equal
// numbers. e^t (t <= 0) is Cephes' exp: t = n ln2 + r by round-to-nearest through a magic
// constant, e^r by its Padé form, 2^n put into the exponent bits. Only additions,
// multiplications, two divisions, selects and integer bit moves: a loop over it vectorises (with
// -fno-trapping-math, src/ops/CMakeLists.txt), and with contraction off every lane, thread and
// SIMD width gives the same bits. Correctly rounded to float wherever checked (x in [-30, 30]
// against long double: the old 0.5 x (1 + tanh u) was not for 2.4% of the points, all x < 0).
#pragma once

#include <cmath>
#include <cstdint>
#include <numbers>

#include "ops/host_device.hpp"

namespace zl::gelu_tanh {

inline constexpr double kCoeff = 0.044715;
inline constexpr double kSqrt2OverPi =
    std::numbers::sqrt2 * std::numbers::inv_sqrtpi;  // sqrt(2/pi)

/// e^t for t <= 0 (to within about one ulp; 0 below -708, where e^t leaves the normal range).
ZL_HOST_DEVICE inline double exp_nonpositive(double t) {
  constexpr double kLog2e = 1.4426950408889634074;
  constexpr double kLn2Hi = 6.93145751953125e-1;  // ln 2 = kLn2Hi + kLn2Lo, kLn2Hi exact in n ln 2
  constexpr double kLn2Lo = 1.42860682030941723212e-6;
  constexpr double kRound = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
  const bool underflow = t < -708.0;
  t = underflow ? -708.0 : t;
  const double shifted = t * kLog2e + kRound;  // its low mantissa bits hold n = round(t log2 e)
  const double n = shifted - kRound;
  const double r = (t - n * kLn2Hi) - n * kLn2Lo;  // |r| <= ln2 / 2
  const double rr = r * r;
  const double p = r * ((1.26177193074810590878e-4 * rr + 3.02994407707441961300e-2) * rr +
                        9.99999999999999999910e-1);
  const double q = ((3.00198505138664455042e-6 * rr + 2.52448340349684104192e-3) * rr +
                    2.27265548208155028766e-1) *
                       rr +
                   2.00000000000000000009e0;
  const double exp_r = 1.0 + 2.0 * (p / (q - p));
  // 2^n: n + 1023 in the exponent field (the low 12 bits of `shifted`'s bits are n's, mod 4096)
  const double scale = host_device::double_from_bits((host_device::bits_of(shifted) + 1023u) << 52);
  const double value = exp_r * scale;
  return underflow ? 0.0 : value;
}

/// sigmoid(2u) and 1 - sigmoid(2u) for u = sqrt(2/pi) (x + 0.044715 x^3).
struct Sigmoids {
  double s;      ///< sigmoid(2u) = (1 + tanh(u)) / 2
  double s_neg;  ///< 1 - s = sigmoid(-2u)
};

/// The two sigmoids of x's tanh argument, from one exponential of -2|u|.
ZL_HOST_DEVICE inline Sigmoids sigmoids(double x) {
  const double u = kSqrt2OverPi * (x + kCoeff * x * x * x);
  const double abs_u = std::fabs(u);
  const double e = exp_nonpositive(-2.0 * abs_u);
  const double big = 1.0 / (1.0 + e);  // sigmoid(2|u|)
  const double small = e * big;        // sigmoid(-2|u|)
  const bool positive = u >= 0.0;
  return {.s = positive ? big : small, .s_neg = positive ? small : big};
}

/// GELU(x) with the tanh approximation, rounded once to float.
ZL_HOST_DEVICE inline float forward(float x) {
  const double v = x;
  return static_cast<float>(v * sigmoids(v).s);
}

/// dy * GELU'(x), rounded once to float:
/// GELU' = s + 2 x s (1 - s) du/dx, du/dx = sqrt(2/pi) (1 + 3 * 0.044715 x^2).
ZL_HOST_DEVICE inline float backward(float x, float dy) {
  const double v = x;
  const Sigmoids g = sigmoids(v);
  const double du_dx = kSqrt2OverPi * (1.0 + 3.0 * kCoeff * v * v);
  const double slope = g.s + 2.0 * v * g.s * g.s_neg * du_dx;
  return static_cast<float>(static_cast<double>(dy) * slope);
}

}  // namespace zl::gelu_tanh
