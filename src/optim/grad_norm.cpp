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

void check_block_sumsq(std::size_t grad_elems, std::size_t partial_elems) {
  ZL_CHECK(grad_elems % kNormBlockElems == 0,
           "gradient span of {} elements is not whole blocks of {}: pad units with layout_units",
           grad_elems, kNormBlockElems);
  ZL_CHECK(partial_elems == grad_elems / kNormBlockElems,
           "block_sumsq: {} partials for {} blocks: pass one per block", partial_elems,
           grad_elems / kNormBlockElems);
}

void block_sumsq(std::span<const float> grads, std::span<double> partials) {
  check_block_sumsq(grads.size(), partials.size());
  for (std::size_t b = 0; b < partials.size(); ++b) {
    double sum = 0.0;
    for (std::size_t i = b * kNormBlockElems; i < (b + 1) * kNormBlockElems; ++i) {
      const double g = grads[i];
      sum += g * g;
    }
    partials[b] = sum;
  }
}

double add_partials(double total, std::span<const double> partials) {
  for (const double partial : partials) total += partial;
  return total;
}

double norm_from_partials(std::span<const double> partials) {
  return std::sqrt(add_partials(0.0, partials));
}

}  // namespace zl
