// rng.hpp — a counter-based random number generator (Philox4x32-10, Salmon et al., SC'11).
// A value depends only on (seed, stream, index), never on call order, thread or world size, so
// parameter init and synthetic data are the same for every W and every backend.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace zl {

/// Philox4x32-10 of the 128-bit counter (stream, index) under the 64-bit key `seed`.
std::array<std::uint32_t, 4> philox4x32(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

/// Uniform float in [0, 1) with 24 random bits, for element `index` of `stream`.
float uniform01(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

/// Standard normal (Box-Muller in double, rounded once to float) for element `index` of `stream`.
float standard_normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t index);

/// Uniform integer in [0, n) for element `index` of `stream` (n >= 1; 64 random bits, modulo).
std::uint64_t uniform_below(std::uint64_t seed, std::uint64_t stream, std::uint64_t index, std::uint64_t n);

/// Stable stream id for a name (64-bit FNV-1a), so a parameter's values follow its name.
std::uint64_t stream_of(std::string_view name);

}  // namespace zl
