// cpu_gemm.cpp — the dispatch and the tiling of the CPU's matrix products: the kernel of the
// CPU's widest instruction set (cpu_isa.hpp), run on tiles of the output that depend on the shape
// alone.
#include "ops/cpu/cpu_gemm.hpp"

#include <algorithm>

#include "ops/cpu/cpu_isa.hpp"
#include "ops/cpu/cpu_thread_pool.hpp"

namespace zl::cpu {

namespace {

// Products smaller than this run as one tile: splitting them costs more than it saves.
constexpr double kMinSplitFlops = 1 << 23;
// Tiles are about this long along the split side, and a multiple of kTileAlignElems (a cache line
// of floats).
constexpr std::int64_t kTargetTileElems = 256;
constexpr std::int64_t kTileAlignElems = 16;

GemmKernelFn kernel_of(Isa isa) {
  switch (isa) {
#if defined(__x86_64__) && defined(__GNUC__)
    case Isa::Avx512:
      return gemm_tile_avx512;
    case Isa::Avx2:
      return gemm_tile_avx2;
#endif
    default:
      return gemm_tile_baseline;
  }
}

std::int64_t ceil_div(std::int64_t a, std::int64_t b) {
  return (a + b - 1) / b;
}

// The tile of `problem` that covers output rows (or columns) [begin, begin + elems).
GemmProblem tile_of(const GemmProblem& problem, bool split_rows, std::int64_t begin,
                    std::int64_t elems) {
  GemmProblem tile = problem;
  if (split_rows) {
    // Rows of op(a) and of c.
    tile.a.data += problem.a.transposed ? begin : begin * problem.a.stride_elems;
    tile.c += begin * problem.c_stride_elems;
    tile.m = elems;
  } else {
    // Columns of op(b) and of c.
    tile.b.data += problem.b.transposed ? begin * problem.b.stride_elems : begin;
    tile.c += begin;
    tile.n = elems;
  }
  return tile;
}

}  // namespace

std::int64_t gemm_tile_elems(std::int64_t m, std::int64_t n, std::int64_t k, Grain grain) {
  const std::int64_t longer = std::max<std::int64_t>({m, n, 1});
  if (grain == Grain::Fine) return std::max<std::int64_t>(1, ceil_div(longer, 4));
  const double flops =
      2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k);
  if (flops < kMinSplitFlops || longer < 2 * kTileAlignElems) return longer;
  std::int64_t count = ceil_div(longer, kTargetTileElems);
  count += count % 2;  // an even count, so two threads get equal shares
  return ceil_div(ceil_div(longer, count), kTileAlignElems) * kTileAlignElems;
}

void gemm(const GemmProblem& problem, CpuThreadPool& pool) {
  if (problem.m == 0 || problem.n == 0) return;
  static const GemmKernelFn kernel = kernel_of(widest_isa());
  const bool split_rows = problem.m >= problem.n;
  const std::int64_t longer = split_rows ? problem.m : problem.n;
  const std::int64_t tile_elems = gemm_tile_elems(problem.m, problem.n, problem.k, pool.grain());
  pool.run(ceil_div(longer, tile_elems), [&](std::int64_t index) {
    const std::int64_t begin = index * tile_elems;
    kernel(tile_of(problem, split_rows, begin, std::min(tile_elems, longer - begin)));
  });
}

void gemm_single_tile(const GemmProblem& problem) {
  static const GemmKernelFn kernel = kernel_of(widest_isa());
  kernel(problem);
}

std::string_view gemm_isa() {
  switch (widest_isa()) {
    case Isa::Avx512:
      return "avx512";
    case Isa::Avx2:
      return "avx2";
    default:
      return "baseline";
  }
}

}  // namespace zl::cpu
