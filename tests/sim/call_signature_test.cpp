// call_signature_test.cpp — the per-call check the process backends run before any data moves (MPI
// always, NCCL under ZL_COLLECTIVE_CHECKS=1), without a process or a GPU: a call's signature holds
// exactly the fields same_signature() compares, the max-reduced bounds agree exactly when every
// rank's signature is equal, and a disagreement reads as the sim's mismatch message.
#include "call_signature.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

namespace zl {
namespace {

// The element-wise max over the ranks' bounds: what the max-reduction leaves on every rank.
SignatureBounds max_bounds(const std::vector<CallSignature>& per_rank) {
  SignatureBounds result = signature_bounds(per_rank.front());
  for (const CallSignature& signature : per_rank) {
    const SignatureBounds bounds = signature_bounds(signature);
    for (std::size_t f = 0; f < result.size(); ++f) result[f] = std::max(result[f], bounds[f]);
  }
  return result;
}

const CallDesc kAllReduce{
    .kind = CollectiveKind::AllReduce, .op = ReduceOp::Max, .dtype = DType::F32, .count = 1000};

TEST(CallSignature, HoldsWhatSameSignatureCompares) {
  CallDesc other_root = kAllReduce;
  other_root.root = 3;  // not compared for an all_reduce
  EXPECT_EQ(call_signature(other_root), call_signature(kAllReduce));
  CallDesc gather{.kind = CollectiveKind::AllGather, .op = ReduceOp::Avg, .count = 8};
  CallDesc gather_sum = gather;
  gather_sum.op = ReduceOp::Sum;  // nor the op of an all_gather
  EXPECT_EQ(call_signature(gather), call_signature(gather_sum));
  CallDesc broadcast{.kind = CollectiveKind::Broadcast, .count = 8, .root = 1};
  CallDesc broadcast_root2 = broadcast;
  broadcast_root2.root = 2;
  EXPECT_NE(call_signature(broadcast), call_signature(broadcast_root2));
  EXPECT_EQ(describe_signature(call_signature(kAllReduce)), "all_reduce(fp32, 1000 elems, max)");
  EXPECT_EQ(describe_signature(call_signature({}, "gather_to_root")), "gather_to_root");
}

TEST(CallSignature, BoundsAgreeExactlyWhenEveryRankMakesTheSameCall) {
  const CallSignature same = call_signature(kAllReduce);
  EXPECT_TRUE(signatures_agree(max_bounds({same, same, same, same})));
  // Any one field on any one rank, up or down, is caught.
  for (std::size_t f = 0; f < kSignatureFields; ++f) {
    for (const std::int64_t delta : {-1, 1}) {
      for (std::size_t rank = 0; rank < 4; ++rank) {
        std::vector<CallSignature> per_rank(4, same);
        per_rank[rank][f] += delta;
        EXPECT_FALSE(signatures_agree(max_bounds(per_rank)))
            << "field " << f << " delta " << delta << " on rank " << rank;
      }
    }
  }
}

TEST(CallSignature, AMismatchNamesRankZerosCallAndTheFirstThatDiffers) {
  const CallSignature reduce = call_signature(kAllReduce);
  const CallSignature gather =
      call_signature({.kind = CollectiveKind::AllGather, .dtype = DType::F32, .count = 1000});
  EXPECT_EQ(signature_mismatch(51, {reduce, reduce, gather, gather}),
            "collective mismatch at call #51: rank 0 called all_reduce(fp32, 1000 elems, max) but "
            "rank 2 called all_gather(fp32, 1000 elems): the ranks run different code paths "
            "(different flags or data on some rank?)");
  EXPECT_EQ(signature_mismatch(1, {reduce, reduce}), "");
}

}  // namespace
}  // namespace zl
