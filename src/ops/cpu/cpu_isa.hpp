// cpu_isa.hpp — the widest x86 vector instruction set this CPU runs, for the kernels that are
// built once per set and chosen at run time (cpu_gemm.cpp, cpu_attention.cpp, the GELU of
// cpu_gpt_kernels.cpp). Chosen with __builtin_cpu_supports into a plain function pointer, never
// target_clones, whose load-time resolvers crash under the thread and address sanitizers.
#pragma once

#include <cstdint>

namespace zl::cpu {

/// An instruction set a kernel is built for.
enum class Isa : std::uint8_t {
  Baseline,  ///< what the compiler targets without -m flags (SSE2 on x86-64)
  Avx2,      ///< AVX2 and FMA
  Avx512,    ///< AVX-512F, AVX2 and FMA
};

/// The widest set this CPU has, found once.
inline Isa widest_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  static const Isa isa = [] {
    __builtin_cpu_init();
    const bool fma = __builtin_cpu_supports("fma") && __builtin_cpu_supports("avx2");
    if (fma && __builtin_cpu_supports("avx512f")) return Isa::Avx512;
    return fma ? Isa::Avx2 : Isa::Baseline;
  }();
  return isa;
#else
  return Isa::Baseline;
#endif
}

}  // namespace zl::cpu
