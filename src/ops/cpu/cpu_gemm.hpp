// cpu_gemm.hpp — the CPU's matrix products (private to src/ops/cpu): one entry point that runs
// Eigen's blocked GEMM built for the widest vector instructions the CPU has (AVX-512, AVX2 or the
// baseline SSE2), cut into fixed tiles that a thread pool shares out.
//
// The tiles depend only on the product's shape, never on the thread count, and each tile is one
// GEMM call whose bits depend only on its shape and the instruction set: so a product gives the
// same bits with 1, 2 or 16 threads. Between machines the instruction set may differ (AVX2 and
// AVX-512 contract multiply-adds into FMAs; SSE2 does not), so bits are per machine
// (docs/exactness.md).
#pragma once

#include <cstdint>
#include <string_view>

#include "ops/cpu/cpu_grain.hpp"

namespace zl::cpu {

class CpuThreadPool;

/// A row-major operand: element (i, j) of the stored matrix is data[i * stride_elems + j]. With
/// `transposed` the product uses its transpose.
struct GemmOperand {
  const float* data = nullptr;    ///< element (0, 0) of the stored matrix
  std::int64_t stride_elems = 0;  ///< elements from one stored row to the next
  bool transposed = false;        ///< the product uses the stored matrix's transpose
};

/// c[m, n] (row-major, stride_elems per row) = op(a)[m, k] * op(b)[k, n], or += with accumulate.
struct GemmProblem {
  GemmOperand a;                    ///< the left factor, op(a) [m, k]
  GemmOperand b;                    ///< the right factor, op(b) [k, n]
  float* c = nullptr;               ///< the product [m, n], row-major
  std::int64_t c_stride_elems = 0;  ///< elements from one row of c to the next
  std::int64_t m = 0;               ///< rows of c
  std::int64_t n = 0;               ///< columns of c
  std::int64_t k = 0;               ///< the depth summed over
  bool accumulate = false;          ///< c += product instead of c = product
};

/// One tile of a product with every pointer already offset: what each instruction set's kernel
/// (cpu_gemm_kernel.cpp) computes with one Eigen product.
using GemmKernelFn = void (*)(const GemmProblem& tile);
void gemm_tile_baseline(const GemmProblem& tile);  ///< no -m flags (SSE2 on x86-64, no FMA)
void gemm_tile_avx2(const GemmProblem& tile);    ///< -mavx2 -mfma; call only where the CPU has both
void gemm_tile_avx512(const GemmProblem& tile);  ///< -mavx512f -mfma; likewise

/// Runs `problem` as fixed tiles (gemm_tile_elems) on `pool`'s threads, each tile with the kernel
/// of the CPU's widest instruction set.
void gemm(const GemmProblem& problem, CpuThreadPool& pool);

/// `problem` as one Eigen product (one tile) on the calling thread, with the CPU's widest
/// instruction set: the plain GEMM rate the benchmarks compare a training step against.
void gemm_single_tile(const GemmProblem& problem);

/// Rows (m >= n) or columns of every tile but the last, cutting c along its longer side: a
/// function of the shape and the grain alone (Grain::Fine: about four tiles).
std::int64_t gemm_tile_elems(std::int64_t m, std::int64_t n, std::int64_t k, Grain grain);

/// "avx512", "avx2" or "baseline": the instruction set gemm() runs on this CPU.
std::string_view gemm_isa();

}  // namespace zl::cpu
