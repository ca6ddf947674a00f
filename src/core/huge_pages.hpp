// huge_pages.hpp — 2 MiB pages for the large blocks a disk's O_DIRECT reads and writes move
// through. On a virtual disk each 4 KiB page of a request is a segment of its own for the host to
// map, unless its neighbours happen to lie next to it; a block on huge pages is one segment per
// 2 MiB and moves at the disk's fast speed every time (docs/performance.md, "Swap blocks on huge
// pages"). Linux backs a range with huge pages when it is first touched if the range asks for
// them (madvise MADV_HUGEPAGE, which transparent_hugepage "madvise" and "always" honour).
#pragma once

#include <cstddef>
#include <cstdint>

namespace zl {

/// A huge page's bytes: 2 MiB (x86-64, and arm64 with 4 KiB pages).
inline constexpr std::size_t kHugePageBytes = std::size_t{2} << 20;

/// `bytes` (or an address) rounded up to whole huge pages.
inline constexpr std::uintptr_t huge_page_padded(std::uintptr_t bytes) {
  return (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
}

/// Asks for huge pages behind the whole huge pages inside [data, data + bytes), before they are
/// first touched. Does nothing where the kernel has none or refuses: the bytes stay as they are
/// either way, only their pages' size changes.
void advise_huge_pages(void* data, std::size_t bytes);

}  // namespace zl
