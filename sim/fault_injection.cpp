// fault_injection.cpp — reading, printing and checking fault specs.
#include "fault_injection.hpp"

#include <fmt/format.h>

#include <charconv>
#include <optional>

#include "core/error.hpp"

namespace zl {

namespace {

// A whole decimal number in [min, max], or nothing (no sign, spaces or trailing characters).
std::optional<std::int64_t> whole_number(std::string_view text, std::int64_t min,
                                         std::int64_t max) {
  std::int64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size() || value < min ||
      value > max) {
    return std::nullopt;
  }
  return value;
}

std::optional<CollectiveKind> collective_of(std::string_view name) {
  for (int k = 0; k < kCollectiveKindCount; ++k) {
    const auto kind = static_cast<CollectiveKind>(k);
    if (collective_name(kind) == name) return kind;
  }
  return std::nullopt;
}

std::optional<FaultKind> fault_kind_of(std::string_view name) {
  for (const FaultKind kind : {FaultKind::Throw, FaultKind::Skip, FaultKind::Slow}) {
    if (fault_kind_name(kind) == name) return kind;
  }
  return std::nullopt;
}

}  // namespace

std::string_view fault_kind_name(FaultKind kind) {
  switch (kind) {
    case FaultKind::Throw:
      return "throw";
    case FaultKind::Skip:
      return "skip";
    case FaultKind::Slow:
      return "slow";
  }
  fail("unknown fault kind {}", static_cast<int>(kind));
}

std::string to_string(const FaultSpec& fault) {
  return fmt::format("rank={},at={}:{},kind={}", fault.rank, collective_name(fault.collective),
                     fault.nth, fault_kind_name(fault.kind));
}

FaultSpec parse_fault_spec(std::string_view text, std::string_view label) {
  const auto bad = [&](const std::string& what) {
    fail("{} {:?}: {}; expected {}", label, text, what, kFaultSpecForm);
  };
  FaultSpec fault;
  bool seen_rank = false;
  bool seen_at = false;
  bool seen_kind = false;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t comma = std::min(text.find(',', begin), text.size());
    const std::string_view part = text.substr(begin, comma - begin);
    begin = comma + 1;
    const std::size_t equals = part.find('=');
    if (equals == std::string_view::npos) bad(fmt::format("{:?} is not key=value", part));
    const std::string_view key = part.substr(0, equals);
    const std::string_view value = part.substr(equals + 1);
    bool* seen = nullptr;
    if (key == "rank") {
      seen = &seen_rank;
      const auto rank = whole_number(value, 0, INT32_MAX);
      if (!rank) bad(fmt::format("rank {:?} is not a rank number (0, 1, ...)", value));
      fault.rank = static_cast<int>(*rank);
    } else if (key == "at") {
      seen = &seen_at;
      const std::size_t colon = value.find(':');
      if (colon == std::string_view::npos) {
        bad(fmt::format("at {:?} has no call number: write it as all_gather:5", value));
      }
      const auto collective = collective_of(value.substr(0, colon));
      if (!collective) {
        bad(fmt::format(
            "collective {:?} is unknown: use all_reduce, reduce_scatter, all_gather, broadcast or "
            "barrier",
            value.substr(0, colon)));
      }
      const auto nth = whole_number(value.substr(colon + 1), 1, INT64_MAX);
      if (!nth) bad(fmt::format("call number {:?} is not 1 or more", value.substr(colon + 1)));
      fault.collective = *collective;
      fault.nth = *nth;
    } else if (key == "kind") {
      seen = &seen_kind;
      const auto kind = fault_kind_of(value);
      if (!kind) bad(fmt::format("kind {:?} is unknown: use throw, skip or slow", value));
      fault.kind = *kind;
    } else {
      bad(fmt::format("key {:?} is unknown: use rank, at and kind", key));
    }
    if (*seen) bad(fmt::format("{} is given twice", key));
    *seen = true;
  }
  if (!seen_rank) bad("rank is missing");
  if (!seen_at) bad("at is missing");
  if (!seen_kind) bad("kind is missing");
  return fault;
}

void validate_faults(const std::vector<FaultSpec>& faults, int world, std::string_view label) {
  for (std::size_t i = 0; i < faults.size(); ++i) {
    const FaultSpec& fault = faults[i];
    ZL_CHECK(fault.rank >= 0 && fault.rank < world,
             "{} {}: rank {} is outside the world of {} ranks: use rank 0..{}", label,
             to_string(fault), fault.rank, world, world - 1);
    ZL_CHECK(
        fault.kind == FaultKind::Throw || world >= 2,
        "{} {}: kind={} needs a world of 2 or more ranks: a lone rank has no peer to notice it",
        label, to_string(fault), fault_kind_name(fault.kind));
    for (std::size_t j = 0; j < i; ++j) {
      const FaultSpec& other = faults[j];
      ZL_CHECK(other.rank != fault.rank || other.collective != fault.collective ||
                   other.nth != fault.nth,
               "{} {} and {} hit the same call: give each call one fault", label, to_string(other),
               to_string(fault));
    }
  }
}

}  // namespace zl
