// cpu_isa.hpp — the widest x86 vector instruction set this CPU runs, for the kernels that are
// built once per set and chosen at run time (cpu_gemm.cpp, cpu_attention.cpp, the GELU of
// cpu_gpt_kernels.cpp). Chosen with __builtin_cpu_supports into a plain function pointer, never
// target_clones, whose load-time resolvers crash under the thread and address sanitizers.
#pragma once

#include <cstdint>

/// ZL_TARGET_AVX2 and ZL_TARGET_AVX512 build a function for AVX2+FMA or AVX-512F+FMA, to be
/// called only where widest_isa() says the CPU has the set; off x86 they build it for the
/// baseline, which widest_of then never picks.
#if defined(__x86_64__) && defined(__GNUC__)
#define ZL_TARGET_AVX2 [[gnu::target("avx2,fma")]]
#define ZL_TARGET_AVX512 [[gnu::target("avx512f,fma")]]
#else
#define ZL_TARGET_AVX2
#define ZL_TARGET_AVX512
#endif

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

/// Of one kernel built for each set, the one for the widest set this CPU has.
template <class Fn>
Fn widest_of(Fn baseline, Fn avx2, Fn avx512) {
  switch (widest_isa()) {
    case Isa::Avx512:
      return avx512;
    case Isa::Avx2:
      return avx2;
    default:
      return baseline;
  }
}

}  // namespace zl::cpu
