// zeropp_test.cpp — ZeRO++'s quantized collectives (qwZ, qgZ) in whole runs. They round, so the
// promise tested is their own: with every feature, the same bits run after run whatever the CPU
// threads, overlap and offload, the first
// step's loss the reference's exactly under qgZ alone (its forward gathers are ZeRO-3's), and the
// collectives the engine makes (qgZ reduces by all_to_all only, qwZ's gathers move a quarter of
// fp32's bytes plus the scales). The error of each collective is tested against its closed form
// in tests/sim/quantized_collectives_test.cpp.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include "comm/quantize.hpp"
#include "engines/quantized_comm.hpp"
#include "run/compare.hpp"
#include "support/arbitrary.hpp"

namespace zl {
namespace {

TrainConfig reference_of(TrainConfig config) {
  config.engine = EngineKind::Reference;
  config.features.quantized_weights = false;
  config.features.quantized_gradients = false;
  config.features.hpz_partition_ranks = 0;
  return config;
}

RC_GTEST_PROP(ZeroPlusPlus, prop_quantized_runs_repeat_bit_for_bit_and_reduce_by_all_to_all,
              (TrainConfig config)) {
  config.engine = EngineKind::Zero3;
  config.threads = 1;
  config.features = *rc::gen_features();
  const bool weights = *rc::gen::arbitrary<bool>();
  config.features.quantized_weights = weights;
  config.features.quantized_gradients = !weights || *rc::gen::arbitrary<bool>();
  if (*rc::gen::arbitrary<bool>()) {
    config.features.hpz_partition_ranks = *rc::gen_hpz_partition(config);
  }
  RC_LOG() << "qwZ " << weights << " qgZ " << config.features.quantized_gradients << " hpZ "
           << config.features.hpz_partition_ranks << "\n";
  const TrainResult first = train(config);
  // Again on other threads, without overlap or prefetch and with every state on the device: those
  // change when and where bytes move, never a bit.
  TrainConfig again = config;
  again.threads = *rc::gen::inRange(1, 4);
  again.features.overlap_comm = false;
  again.features.prefetch_bucket_elems = 0;
  again.features.offload_optimizer = again.features.offload_param = false;
  again.features.nvme_path.clear();
  again.features.param_nvme_path.clear();
  if (const auto diff = first_difference(train(again), first)) RC_FAIL(*diff);

  const TrainResult reference = train(reference_of(config));
  if (!weights) RC_ASSERT(first.steps.front().loss == reference.steps.front().loss);
  for (const RankReport& rank : first.ranks) {
    const TrafficLedger& traffic = rank.traffic;
    if (config.features.quantized_gradients) {
      RC_ASSERT(traffic.calls(CollectiveKind::ReduceScatter) == 0);
      RC_ASSERT(traffic.calls(CollectiveKind::AllToAll) > 0);
    } else {
      RC_ASSERT(traffic.calls(CollectiveKind::AllToAll) == 0);
    }
  }
}

// qwZ alone, without hpZ: every parameter gather (forward and backward, each unit each step)
// sends W-1 shards of int8 codes and their scales, the shard's quantized_bytes, where ZeRO-3
// sends W-1 fp32 shards; the other all_gathers (the norm's partials, the final state) are the
// same.
TEST(ZeroPlusPlus, QuantizedGathersSendTheInt8BytesOfTheShards) {
  TrainConfig config;
  config.engine = EngineKind::Zero3;
  config.world = 4;
  config.steps = 2;
  config.mlp = {.layers = 3, .width = 40, .in = 24, .classes = 10};
  const TrainResult plain = train(config);
  config.features.quantized_weights = true;
  const TrainResult result = train(config);
  std::int64_t fp32_bytes = 0;
  std::int64_t int8_bytes = 0;
  for (const UnitLayout& unit : result.layout) {
    const std::int64_t shard_elems = unit.padded_elems / config.world;
    fp32_bytes += (config.world - 1) * shard_elems * 4;
    int8_bytes +=
        (config.world - 1) * quantized_bytes(shard_elems, kQuantBlockElems, QuantBits::Int8);
  }
  const std::int64_t gathers = config.steps * 2;  // forward and backward, once a step each
  EXPECT_EQ(result.ranks.front().traffic.sent_bytes(CollectiveKind::AllGather),
            plain.ranks.front().traffic.sent_bytes(CollectiveKind::AllGather) -
                gathers * fp32_bytes + gathers * int8_bytes);
}

}  // namespace
}  // namespace zl
