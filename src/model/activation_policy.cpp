// activation_policy.cpp — the policies' names, both ways.
#include "model/activation_policy.hpp"

#include <fmt/format.h>

#include <charconv>

#include "core/error.hpp"

namespace zl {

std::string activation_policy_name(const ActivationPolicy& policy) {
  switch (policy.recompute) {
    case Recompute::None: return "none";
    case Recompute::Selective: return "selective";
    case Recompute::Full:
      return policy.every_blocks == 1 ? "full" : fmt::format("every:{}", policy.every_blocks);
  }
  fail("unknown recompute mode {}", static_cast<int>(policy.recompute));
}

ActivationPolicy parse_activation_policy(std::string_view text, std::string_view flag) {
  if (text == "none") return {};
  if (text == "full") return {.recompute = Recompute::Full};
  if (text == "selective") return {.recompute = Recompute::Selective};
  constexpr std::string_view kEvery = "every:";
  if (text.starts_with(kEvery)) {
    const std::string_view digits = text.substr(kEvery.size());
    int every = 0;
    const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), every);
    ZL_CHECK(error == std::errc() && end == digits.data() + digits.size() && every >= 1,
             "{} {} is invalid: every:K needs a whole number of blocks K >= 1", flag, text);
    return {.recompute = Recompute::Full, .every_blocks = every};
  }
  fail("{} {} is not known: use none, full, every:K or selective", flag, text);
}

}  // namespace zl
