// collective_checks.cpp — the ZL_COLLECTIVE_CHECKS variable read and checked.
#include "comm/collective_checks.hpp"

#include <cstdlib>
#include <string_view>

#include "core/error.hpp"

namespace zl {

std::string collective_checks_setting() {
  const char* value = std::getenv("ZL_COLLECTIVE_CHECKS");
  if (value == nullptr || std::string_view(value).empty() || std::string_view(value) == "0") {
    return "off";
  }
  return std::string_view(value) == "1" ? "on" : value;
}

bool collective_checks_from_env() {
  const std::string setting = collective_checks_setting();
  if (setting == "on" || setting == "off") return setting == "on";
  fail(
      "environment variable ZL_COLLECTIVE_CHECKS={} is not 0 or 1: set it to 1 to check every "
      "NCCL call across the ranks, or unset it",
      setting);
}

}  // namespace zl
