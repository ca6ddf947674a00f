// stream_copy.cpp — the streaming copy, built per instruction set and chosen once at run time
// (as src/optim/adamw_fused.cpp chooses its kernel). The unaligned head and tail of the
// destination go through std::memcpy.
#include "stream_copy.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace zl {

namespace {

constexpr std::size_t kLineBytes = 64;

#if defined(__x86_64__)

// Each copies `lines` whole cache lines to a 64-byte-aligned `dst`.
void stream_lines_sse2(std::byte* dst, const std::byte* src, std::size_t lines) {
  for (std::size_t i = 0; i < lines; ++i) {
    auto* out = reinterpret_cast<__m128i*>(dst + i * kLineBytes);
    const auto* in = reinterpret_cast<const __m128i*>(src + i * kLineBytes);
    for (int k = 0; k < 4; ++k) _mm_stream_si128(out + k, _mm_loadu_si128(in + k));
  }
}

[[gnu::target("avx2")]] void stream_lines_avx2(std::byte* dst, const std::byte* src,
                                               std::size_t lines) {
  for (std::size_t i = 0; i < lines; ++i) {
    auto* out = reinterpret_cast<__m256i*>(dst + i * kLineBytes);
    const auto* in = reinterpret_cast<const __m256i*>(src + i * kLineBytes);
    _mm256_stream_si256(out, _mm256_loadu_si256(in));
    _mm256_stream_si256(out + 1, _mm256_loadu_si256(in + 1));
  }
}

[[gnu::target("avx512f")]] void stream_lines_avx512(std::byte* dst, const std::byte* src,
                                                    std::size_t lines) {
  for (std::size_t i = 0; i < lines; ++i) {
    _mm512_stream_si512(reinterpret_cast<__m512i*>(dst + i * kLineBytes),
                        _mm512_loadu_si512(src + i * kLineBytes));
  }
}

using StreamLines = void (*)(std::byte*, const std::byte*, std::size_t);

StreamLines pick_stream_lines() {
  if (__builtin_cpu_supports("avx512f")) return stream_lines_avx512;
  if (__builtin_cpu_supports("avx2")) return stream_lines_avx2;
  return stream_lines_sse2;
}

#endif

}  // namespace

void stream_copy(void* dst, const void* src, std::size_t size_bytes) {
#if defined(__x86_64__)
  static const StreamLines stream_lines = pick_stream_lines();
  auto* out = static_cast<std::byte*>(dst);
  const auto* in = static_cast<const std::byte*>(src);
  const std::size_t misaligned = reinterpret_cast<std::uintptr_t>(out) % kLineBytes;
  const std::size_t head_bytes =
      misaligned == 0 ? 0 : std::min(size_bytes, kLineBytes - misaligned);
  if (head_bytes > 0) std::memcpy(out, in, head_bytes);
  const std::size_t lines = (size_bytes - head_bytes) / kLineBytes;
  stream_lines(out + head_bytes, in + head_bytes, lines);
  const std::size_t done_bytes = head_bytes + lines * kLineBytes;
  if (done_bytes < size_bytes)
    std::memcpy(out + done_bytes, in + done_bytes, size_bytes - done_bytes);
#else
  if (size_bytes > 0) std::memcpy(dst, src, size_bytes);
#endif
}

void stream_fence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

}  // namespace zl
