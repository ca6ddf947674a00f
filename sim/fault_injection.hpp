// fault_injection.hpp — faults the simulator can inject into one rank's collective calls, so tests
// can show that every failure ends within the collective timeout with an error naming the rank
// and the call: a rank that throws, one that silently skips a collective (the divergent-path hang
// ZeRO-3 users meet), and one that arrives later than the timeout. Written as the command line
// takes them: "rank=2,at=all_gather:5,kind=throw".
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "comm/traffic_ledger.hpp"

namespace zl {

/// What the faulty rank does when it reaches the call.
enum class FaultKind : std::uint8_t {
  Throw,  ///< throws zl::Error "injected fault at <collective> #<n> (call #<k>)"
  Skip,   ///< returns from the call without taking part: the others see a mismatch or early return
  Slow,   ///< sleeps past the collective timeout before taking part: the others time out
};

/// One injected fault: rank `rank` meets `kind` at its `nth` call of `collective`.
struct FaultSpec {
  int rank = 0;  ///< the misbehaving rank, in [0, world)
  CollectiveKind collective = CollectiveKind::AllReduce;  ///< the kind of call it misbehaves at
  std::int64_t nth = 1;  ///< 1-based: counts this rank's calls of `collective` only
  FaultKind kind = FaultKind::Throw;  ///< what it does there

  /// Same rank, collective, count and kind.
  friend bool operator==(const FaultSpec&, const FaultSpec&) = default;
};

/// The form parse_fault_spec() reads, for messages and help text.
inline constexpr std::string_view kFaultSpecForm = "rank=R,at=COLLECTIVE:N,kind=throw|skip|slow";

/// "throw", "skip" or "slow".
std::string_view fault_kind_name(FaultKind kind);

/// "rank=2,at=all_gather:5,kind=throw": the text parse_fault_spec() reads back.
std::string to_string(const FaultSpec& fault);

/// Parses "rank=R,at=COLLECTIVE:N,kind=throw|skip|slow" (the three keys in any order, each once;
/// COLLECTIVE named as in the traffic ledger: all_reduce, reduce_scatter, all_gather, broadcast,
/// barrier; N >= 1). Throws a one-line zl::Error that starts with `label` and the text, names the
/// bad part and shows the expected form.
FaultSpec parse_fault_spec(std::string_view text, std::string_view label = "fault");

/// Checks `faults` against a world of `world` ranks: every rank in range, skip and slow only where
/// another rank can notice (world >= 2), at most one fault per call. Throws a one-line zl::Error
/// that starts with `label` and the fault.
void validate_faults(const std::vector<FaultSpec>& faults, int world,
                     std::string_view label = "fault");

}  // namespace zl
