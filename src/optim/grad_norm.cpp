// grad_norm.cpp — block sums of squares and the ordered total.
#include "optim/grad_norm.hpp"

#include <cmath>

#include "core/error.hpp"

namespace zl {

void append_block_sumsq(std::span<const float> grads, std::vector<double>& partials) {
  ZL_CHECK(grads.size() % kNormBlockElems == 0,
           "gradient span of {} elements is not whole blocks of {}: pad units with layout_units",
           grads.size(), kNormBlockElems);
  for (std::size_t begin = 0; begin < grads.size(); begin += kNormBlockElems) {
    double sum = 0.0;
    for (std::size_t i = begin; i < begin + kNormBlockElems; ++i) {
      const double g = grads[i];
      sum += g * g;
    }
    partials.push_back(sum);
  }
}

double norm_from_partials(std::span<const double> partials) {
  double total = 0.0;
  for (const double partial : partials) total += partial;
  return std::sqrt(total);
}

}  // namespace zl
