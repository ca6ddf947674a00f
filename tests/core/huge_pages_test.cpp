// huge_pages_test.cpp — the whole huge pages of a range, and only they, ask for huge pages; the
// swap files' blocks of 2 MiB and more start on a huge page and ask for them.
#include "core/huge_pages.hpp"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdint>

#include "core/io_queue.hpp"
#include "support/huge_page_flags.hpp"

namespace zl {
namespace {

using test::asks_for_huge_pages;

TEST(HugePages, TheWholeHugePagesOfARangeAskForThemAndNothingAround) {
  if (!test::kernel_has_huge_pages()) GTEST_SKIP() << "this kernel has no transparent huge pages";
  constexpr std::size_t kMapped = 8 * kHugePageBytes;
  void* mapped =
      ::mmap(nullptr, kMapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  ASSERT_NE(mapped, MAP_FAILED);
  auto* base = static_cast<std::byte*>(mapped);
  // A range that starts and ends inside huge pages: only the whole ones between are advised.
  std::byte* range = base + kHugePageBytes + 4096;
  const std::size_t range_bytes = 4 * kHugePageBytes;
  const auto to_huge = [](const std::byte* p) {
    const auto at = reinterpret_cast<std::uintptr_t>(p);
    return reinterpret_cast<std::byte*>((at + kHugePageBytes - 1) / kHugePageBytes *
                                        kHugePageBytes);
  };
  std::byte* first = to_huge(range);
  std::byte* end = to_huge(range + range_bytes + 1) - kHugePageBytes;
  ASSERT_LT(first, end);
  EXPECT_FALSE(asks_for_huge_pages(base));
  advise_huge_pages(range, range_bytes);
  EXPECT_FALSE(asks_for_huge_pages(base));
  EXPECT_FALSE(asks_for_huge_pages(first - 4096));
  EXPECT_TRUE(asks_for_huge_pages(first));
  EXPECT_TRUE(asks_for_huge_pages(end - 4096));
  EXPECT_FALSE(asks_for_huge_pages(end));
  ::munmap(mapped, kMapped);
}

// (bench nvme --pages small asks for blocks on 4 KiB pages: 40 MiB, above glibc's largest mmap
// threshold, is a mapping of its own.)
TEST(HugePages, SwapBlocksOfTwoMebibytesAndMoreStartOnAHugePageThatAsksForThem) {
  for (const std::int64_t bytes : {std::int64_t{4096}, std::int64_t{1} << 20}) {
    const PageAlignedBytes block = page_aligned_bytes(bytes, "test");
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(block.get()) % kPageBytes, 0u) << bytes;
  }
  for (const std::int64_t bytes : {std::int64_t{2} << 20, (std::int64_t{5} << 20) + 4096}) {
    const PageAlignedBytes block = page_aligned_bytes(bytes, "test");
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(block.get()) % kHugePageBytes, 0u) << bytes;
    if (test::kernel_has_huge_pages()) {
      EXPECT_TRUE(asks_for_huge_pages(block.get())) << bytes;
    }
  }
  const PageAlignedBytes small_pages = page_aligned_bytes(40 << 20, "test", /*huge_pages=*/false);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small_pages.get()) % kPageBytes, 0u);
  EXPECT_FALSE(asks_for_huge_pages(small_pages.get()));
}

}  // namespace
}  // namespace zl
