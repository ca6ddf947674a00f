// huge_page_flags.hpp — whether the kernel was asked for huge pages behind an address: the
// mapping's VmFlags in /proc/self/smaps carry "hg" after madvise(MADV_HUGEPAGE)
// (core/huge_pages.hpp; tests/core, tests/model).
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace zl::test {

/// True where the kernel has transparent huge pages to ask for.
inline bool kernel_has_huge_pages() {
  return std::filesystem::exists("/sys/kernel/mm/transparent_hugepage/enabled");
}

/// True when the mapping that holds `address` asks for huge pages; false when it does not or no
/// mapping holds it.
inline bool asks_for_huge_pages(const void* address) {
  const auto at = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t begin = 0;
    std::uintptr_t end = 0;
    char dash = 0;
    std::istringstream range(line);
    // A mapping's first line: "begin-end perms offset dev inode path", both bounds in hex.
    if (range >> std::hex >> begin >> dash >> end && dash == '-') {
      inside = begin <= at && at < end;
      continue;
    }
    if (inside && line.starts_with("VmFlags:")) return line.find(" hg") != std::string::npos;
  }
  return false;
}

}  // namespace zl::test
