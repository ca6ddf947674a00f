// grad_check.hpp — the answer key for the model tests: the MLP's ops reimplemented in double,
// central differences of a double function, and a comparison that names the worst element.
#pragma once

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iostream>
#include <limits>
#include <numbers>
#include <span>
#include <string>
#include <vector>

#include "model/mlp.hpp"

namespace zl::test {

/// y[rows, out] = x[rows, in] w[out, in]^T + b[out], in double.
inline std::vector<double> ref_linear(std::span<const double> x, std::span<const double> w,
                                      std::span<const double> b, std::int64_t rows, std::int64_t in,
                                      std::int64_t out) {
  std::vector<double> y(static_cast<std::size_t>(rows * out));
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t o = 0; o < out; ++o) {
      double sum = b[o];
      for (std::int64_t i = 0; i < in; ++i) sum += x[r * in + i] * w[o * in + i];
      y[r * out + o] = sum;
    }
  }
  return y;
}

/// torch.nn.GELU(): x Phi(x) with the exact erf, in double.
inline double ref_gelu(double x) {
  return 0.5 * x * (1.0 + std::erf(x / std::numbers::sqrt2));
}

/// Mean cross-entropy of logits[rows, classes], in double, straight from the definition.
inline double ref_cross_entropy(std::span<const double> logits,
                                std::span<const std::int64_t> labels, std::int64_t rows,
                                std::int64_t classes) {
  double total = 0.0;
  for (std::int64_t r = 0; r < rows; ++r) {
    const double* row = logits.data() + r * classes;
    const double max_logit = *std::max_element(row, row + classes);
    double exp_sum = 0.0;
    for (std::int64_t c = 0; c < classes; ++c) exp_sum += std::exp(row[c] - max_logit);
    total += std::log(exp_sum) + max_logit - row[labels[r]];
  }
  return total / static_cast<double>(rows);
}

/// The MLP's mean loss in double; `flat` holds every unit's weight then bias, unit after unit.
inline double ref_mlp_loss(const MlpConfig& config, std::span<const double> flat,
                           const Batch& batch) {
  std::vector<double> act(batch.x.begin(), batch.x.end());
  std::size_t offset = 0;
  for (int i = 0; i < config.layers; ++i) {
    const std::int64_t in = i == 0 ? config.in : config.width;
    const std::int64_t out = i == config.layers - 1 ? config.classes : config.width;
    const auto w = flat.subspan(offset, static_cast<std::size_t>(out * in));
    const auto b = flat.subspan(offset + w.size(), static_cast<std::size_t>(out));
    offset += w.size() + b.size();
    act = ref_linear(act, w, b, batch.rows, in, out);
    if (i != config.layers - 1) {
      for (auto& v : act) v = ref_gelu(v);
    }
  }
  return ref_cross_entropy(act, batch.y, batch.rows, config.classes);
}

/// d f / d point[k] for every k by central differences (f(p + h e_k) - f(p - h e_k)) / 2h.
inline std::vector<double> central_differences(
    const std::function<double(std::span<const double>)>& f, std::vector<double> point, double h) {
  std::vector<double> grad(point.size());
  for (std::size_t k = 0; k < point.size(); ++k) {
    const double saved = point[k];
    point[k] = saved + h;
    const double up = f(point);
    point[k] = saved - h;
    const double down = f(point);
    point[k] = saved;
    grad[k] = (up - down) / (2.0 * h);
  }
  return grad;
}

/// Outcome of comparing an analytic gradient with a numeric one.
struct GradCheck {
  bool ok = true;
  std::size_t worst_index = 0;
  double analytic = 0.0;
  double numeric = 0.0;
  double worst_ratio = 0.0;  ///< |analytic - numeric| / allowed, at the worst element (<= 1 passes)
  std::string report() const {
    return fmt::format(
        "{}: worst element {} analytic {:.9g} numeric {:.9g} ({:.3g}x the tolerance)",
        ok ? "OK" : "NOT OK", worst_index, analytic, numeric, worst_ratio);
  }
};

/// Passes when every |analytic - numeric| <= abs_tol + rel_tol * |numeric|.
inline GradCheck check_gradient(std::span<const float> analytic, std::span<const double> numeric,
                                double abs_tol, double rel_tol) {
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  GradCheck check;
  if (analytic.size() != numeric.size()) {
    check.ok = false;
    check.worst_ratio = kInfinity;
    return check;
  }
  check.worst_ratio = -1.0;  // so the first element is always recorded
  for (std::size_t k = 0; k < analytic.size(); ++k) {
    const double allowed = abs_tol + rel_tol * std::abs(numeric[k]);
    const double error = std::abs(static_cast<double>(analytic[k]) - numeric[k]);
    const double ratio = std::isnan(error) ? kInfinity : error / allowed;  // NaN never passes
    if (ratio > check.worst_ratio) {
      check = {ratio <= 1.0, k, analytic[k], numeric[k], ratio};
    }
  }
  return check;
}

/// Prints the check as a report line ("dw OK: worst element ...") and fails the test unless it
/// passed.
inline void expect_gradient_ok(const std::string& what, const GradCheck& check) {
  std::cout << "  " << what << " " << check.report() << "\n";
  EXPECT_TRUE(check.ok) << what << " " << check.report();
}

/// Values of the same float span as double.
inline std::vector<double> to_double(std::span<const float> values) {
  return {values.begin(), values.end()};
}

}  // namespace zl::test
