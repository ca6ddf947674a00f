// call_signature.cpp — calls as integers, their bounds, and the mismatch message.
#include "call_signature.hpp"

#include <fmt/format.h>

namespace zl {

namespace {

// Kinds of MPI's out-of-band calls, beyond every CollectiveKind.
constexpr std::int64_t kOutOfBandKind = 100;

}  // namespace

CallSignature call_signature(const CallDesc& call, std::string_view out_of_band) {
  if (!out_of_band.empty()) {
    return {kOutOfBandKind + (out_of_band == "broadcast_from_root" ? 1 : 0), 0, 0, 0, 0};
  }
  if (call.kind == CollectiveKind::Barrier) {
    return {static_cast<std::int64_t>(call.kind), 0, 0, 0, 0};
  }
  return {static_cast<std::int64_t>(call.kind),
          is_reduction(call.kind) ? static_cast<std::int64_t>(call.op) : 0,
          static_cast<std::int64_t>(call.dtype), static_cast<std::int64_t>(call.count),
          call.kind == CollectiveKind::Broadcast ? call.root : 0};
}

std::string describe_signature(const CallSignature& signature) {
  if (signature[0] >= kOutOfBandKind) {
    return signature[0] == kOutOfBandKind ? "gather_to_root" : "broadcast_from_root";
  }
  const CallDesc call{.kind = static_cast<CollectiveKind>(signature[0]),
                      .op = static_cast<ReduceOp>(signature[1]),
                      .dtype = static_cast<DType>(signature[2]),
                      .count = static_cast<std::size_t>(signature[3]),
                      .root = static_cast<int>(signature[4])};
  return describe(call);
}

SignatureBounds signature_bounds(const CallSignature& signature) {
  SignatureBounds bounds{};
  for (std::size_t f = 0; f < signature.size(); ++f) {
    bounds[f] = signature[f];
    bounds[kSignatureFields + f] = -signature[f];
  }
  return bounds;
}

bool signatures_agree(const SignatureBounds& max_bounds) {
  for (std::size_t f = 0; f < kSignatureFields; ++f) {
    if (max_bounds[f] != -max_bounds[kSignatureFields + f]) return false;
  }
  return true;
}

std::string signature_mismatch(std::int64_t call_number,
                               const std::vector<CallSignature>& per_rank) {
  std::size_t other = 1;
  while (other < per_rank.size() && per_rank[other] == per_rank[0]) ++other;
  if (other == per_rank.size()) return {};
  return fmt::format(
      "collective mismatch at call #{}: rank 0 called {} but rank {} called {}: the ranks run "
      "different code paths (different flags or data on some rank?)",
      call_number, describe_signature(per_rank[0]), other, describe_signature(per_rank[other]));
}

}  // namespace zl
