// cpu_grain.hpp — how finely the CPU kernels cut their work into pieces for the device's threads.
#pragma once

#include <cstdint>

namespace zl::cpu {

/// How finely the kernels cut their work into pieces. Either way the pieces depend on the shape
/// alone, never on the thread count. The grain decides the tiles of a product, and so the order
/// of its sums: a run at one grain gives the same bits with any thread count.
enum class Grain : std::uint8_t {
  Normal,  ///< pieces worth a hand-off between threads; small products stay whole
  Fine,    ///< tests: even the smallest shapes in several pieces, so properties reach the threads
};

}  // namespace zl::cpu
