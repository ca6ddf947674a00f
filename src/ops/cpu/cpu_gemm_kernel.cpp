// cpu_gemm_kernel.cpp — one tile of a matrix product as one Eigen product. This file is compiled
// three times (src/ops/CMakeLists.txt): for the baseline, with -mavx2 -mfma and with
// -mavx512f -mfma, each defining ZL_GEMM_ISA, and cpu_gemm.cpp picks one at run time.
//
// Keeping the three builds apart: Eigen is templates, and a template instantiated in two files
// with different flags is one symbol to the linker, which keeps either copy (an AVX-512 copy could
// then run on a CPU without AVX-512). So each build renames Eigen's namespace (the macro below,
// before the first Eigen header) and gets its own symbols: zl_eigen_avx512::..., and so on. This
// file includes nothing but Eigen and <cstdint>, so no other inline function is compiled here
// with the wider instructions: `nm -C` on each object shows weak symbols only in its own
// zl_eigen_<isa> namespace, besides DW.ref.__gxx_personality_v0 (a pointer, the same in all).
//
// Bits: each product runs Eigen's blocked GEMM (never the coefficient-based path, threshold 0),
// which packs its operands, so the result does not depend on addresses; it depends on the shape
// (the blocking) and on the instruction set (FMA or not).
#if !defined(ZL_GEMM_ISA)
#error "define ZL_GEMM_ISA (baseline, avx2 or avx512): src/ops/CMakeLists.txt compiles this file"
#endif
#define ZL_GEMM_JOIN2(a, b) a##b
#define ZL_GEMM_JOIN(a, b) ZL_GEMM_JOIN2(a, b)
#define Eigen ZL_GEMM_JOIN(zl_eigen_, ZL_GEMM_ISA)
#define EIGEN_GEMM_TO_COEFFBASED_THRESHOLD 0
#define EIGEN_DONT_PARALLELIZE

#include <Eigen/Core>
#include <cstdint>

#include "ops/cpu/cpu_gemm.hpp"

namespace zl::cpu {

namespace {

using RowMajor = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstView = Eigen::Map<const RowMajor, Eigen::Unaligned, Eigen::OuterStride<>>;
using MutView = Eigen::Map<RowMajor, Eigen::Unaligned, Eigen::OuterStride<>>;

// op(x) as an [rows, cols] view: the stored matrix is [cols, rows] when transposed.
ConstView stored(const GemmOperand& x, std::int64_t rows, std::int64_t cols) {
  return x.transposed ? ConstView(x.data, cols, rows, Eigen::OuterStride<>(x.stride_elems))
                      : ConstView(x.data, rows, cols, Eigen::OuterStride<>(x.stride_elems));
}

template <typename A, typename B>
void product(MutView& c, const A& a, const B& b, bool accumulate) {
  if (accumulate) {
    c.noalias() += a * b;
  } else {
    c.noalias() = a * b;
  }
}

}  // namespace

void ZL_GEMM_JOIN(gemm_tile_, ZL_GEMM_ISA)(const GemmProblem& t) {
  MutView c(t.c, t.m, t.n, Eigen::OuterStride<>(t.c_stride_elems));
  const ConstView a = stored(t.a, t.m, t.k);
  const ConstView b = stored(t.b, t.k, t.n);
  if (t.a.transposed && t.b.transposed) {
    product(c, a.transpose(), b.transpose(), t.accumulate);
  } else if (t.a.transposed) {
    product(c, a.transpose(), b, t.accumulate);
  } else if (t.b.transposed) {
    product(c, a, b.transpose(), t.accumulate);
  } else {
    product(c, a, b, t.accumulate);
  }
}

}  // namespace zl::cpu
