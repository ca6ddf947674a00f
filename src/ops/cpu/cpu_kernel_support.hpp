// cpu_kernel_support.hpp — what the CPU kernel files share (private to src/ops/cpu): Eigen set up
// for bit-reproducible products, row-major maps over spans (the kernels' arguments are checked
// before they run: ops/device.cpp).
//
// Same inputs must give the same bits at any address. Eigen's blocked products keep that promise:
// GEMM packs its operands into its own blocks and GEMV loads unaligned in a fixed order. Two other
// Eigen paths were measured not to: reductions over contiguous memory (.sum(), .colwise().sum()),
// which start their SIMD lanes at the first aligned element, so the kernels never use them; and,
// in AVX builds (-march=x86-64-v3 or native), the coefficient-based evaluation Eigen picks for
// small products (rows + cols + depth < 20). Threshold 0 sends every product to the blocked
// kernels. Every file that uses Eigen includes this header first, so all of them see the same
// threshold (one definition of each Eigen template). The tests
// LinearBitsDoNotDependOnBufferAddresses and Conv1dBitsDoNotDependOnBufferAddresses guard all of
// this.
#pragma once

#if defined(EIGEN_CORE_H)
#error "include ops/cpu/cpu_kernel_support.hpp before any Eigen header"
#endif
#define EIGEN_GEMM_TO_COEFFBASED_THRESHOLD 0

#include <Eigen/Core>
#include <cstddef>
#include <cstdint>
#include <span>

#include "core/error.hpp"

namespace zl::cpu {

using ConstMatrix =
    Eigen::Map<const Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;
using MutMatrix = Eigen::Map<Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>>;

/// A row-major [rows, cols] view of `data`.
inline ConstMatrix matrix(std::span<const float> data, std::int64_t rows, std::int64_t cols) {
  return ConstMatrix(data.data(), rows, cols);
}
inline MutMatrix matrix(std::span<float> data, std::int64_t rows, std::int64_t cols) {
  return MutMatrix(data.data(), rows, cols);
}

}  // namespace zl::cpu
