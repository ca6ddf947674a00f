// huge_pages.cpp — madvise(MADV_HUGEPAGE) over the whole huge pages of a range.
#include "core/huge_pages.hpp"

#include <sys/mman.h>

namespace zl {

void advise_huge_pages(void* data, std::size_t bytes) {
#ifdef MADV_HUGEPAGE
  const auto begin = reinterpret_cast<std::uintptr_t>(data);
  const std::uintptr_t first = huge_page_padded(begin);
  const std::uintptr_t end = (begin + bytes) / kHugePageBytes * kHugePageBytes;  // rounded down
  // A refusal (a kernel without transparent huge pages) leaves 4 KiB pages: the same bytes.
  if (end > first) (void)::madvise(reinterpret_cast<void*>(first), end - first, MADV_HUGEPAGE);
#else
  (void)data;
  (void)bytes;
#endif
}

}  // namespace zl
