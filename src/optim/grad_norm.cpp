// grad_norm.cpp — block sums of squares and the ordered total.
#include "optim/grad_norm.hpp"

#include <cmath>

#include "core/error.hpp"

namespace zl {

void append_block_sumsq(std::span<const float> grads, std::vector<double>& partials) {
  const std::size_t first = partials.size();
  partials.resize(first + grads.size() / kNormBlockElems);
  block_sumsq(grads, std::span<double>(partials).subspan(first));
}

void block_sumsq(std::span<const float> grads, std::span<double> partials) {
  ZL_CHECK(grads.size() % kNormBlockElems == 0,
           "gradient span of {} elements is not whole blocks of {}: pad units with layout_units",
           grads.size(), kNormBlockElems);
  ZL_CHECK(partials.size() == grads.size() / kNormBlockElems,
           "block_sumsq: {} partials for {} blocks: pass one per block", partials.size(),
           grads.size() / kNormBlockElems);
  for (std::size_t b = 0; b < partials.size(); ++b) {
    double sum = 0.0;
    for (std::size_t i = b * kNormBlockElems; i < (b + 1) * kNormBlockElems; ++i) {
      const double g = grads[i];
      sum += g * g;
    }
    partials[b] = sum;
  }
}

double norm_from_partials(std::span<const double> partials) {
  double total = 0.0;
  for (const double partial : partials) total += partial;
  return std::sqrt(total);
}

}  // namespace zl
