// call_signature.hpp — a collective call as the few integers the ranks of a process backend compare
// before any data moves (MPI on every call, NCCL under ZL_COLLECTIVE_CHECKS=1): its kind, reduce
// op, dtype, count and root, and the bounds trick that compares them in one small max-reduction
// (each field and its negation: after an element-wise max over the ranks, they agree when the
// largest value equals the smallest). The mismatch message is the sim's.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "call_desc.hpp"

namespace zl {

/// Fields of a call signature: kind, reduce op, dtype, count, root.
inline constexpr int kSignatureFields = 5;

/// A call as integers; the fields same_signature() ignores are zero (a barrier is its kind alone,
/// only reductions have an op, only a broadcast a root).
using CallSignature = std::array<std::int64_t, kSignatureFields>;

/// Each field of a signature, then each one negated: what the ranks max-reduce.
using SignatureBounds = std::array<std::int64_t, 2 * kSignatureFields>;

/// The signature of `call`; with `out_of_band` ("gather_to_root" or "broadcast_from_root", MPI's
/// calls outside the traffic ledger), that call's own signature instead.
CallSignature call_signature(const CallDesc& call, std::string_view out_of_band = {});

/// The call in words as describe() writes it ("all_reduce(fp32, 1000 elems, max)").
std::string describe_signature(const CallSignature& signature);

/// The bounds one rank contributes to the max-reduction.
SignatureBounds signature_bounds(const CallSignature& signature);

/// True when the element-wise max of every rank's bounds says all signatures are equal.
bool signatures_agree(const SignatureBounds& max_bounds);

/// "collective mismatch at call #N: rank 0 called X but rank R called Y: ..." for the first rank
/// whose signature differs from rank 0's (`per_rank`: index = rank).
std::string signature_mismatch(std::int64_t call_number,
                               const std::vector<CallSignature>& per_rank);

}  // namespace zl
