// equivalence_test.cpp — the exactness promise: every stage, bit for bit, is the reference.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <algorithm>

#include "run/compare.hpp"
#include "support/arbitrary.hpp"
#include "support/small_config.hpp"

namespace zl {
namespace {

constexpr EngineKind kStages[] = {EngineKind::Ddp, EngineKind::Zero1, EngineKind::Zero2, EngineKind::Zero3};

TrainResult run(TrainConfig config, EngineKind engine) {
  config.engine = engine;
  return train(config);
}

// Hybrid sharding (ZeRO-1, 2 and 3 sharding inside each node, replicas across the nodes; one
// node: the stage itself) and ZeRO++'s hpZ (backward gathers from the secondary shards of a drawn
// partition) against `reference`.
void check_hybrid_engines(const TrainConfig& config, const TrainResult& reference) {
  TrainConfig hybrid = config;
  hybrid.features.shard_group_ranks = ranks_per_node(config.world, config.gpus_per_node);
  for (const EngineKind stage : {EngineKind::Zero1, EngineKind::Zero2, EngineKind::Zero3}) {
    if (const auto diff = first_difference(run(hybrid, stage), reference)) {
      RC_FAIL(fmt::format("{} in shard groups of {}: {}", engine_name(stage),
                          hybrid.features.shard_group_ranks, *diff));
    }
  }
  TrainConfig hpz = config;
  hpz.features.hpz_partition_ranks = *rc::gen_hpz_partition(config);
  if (const auto diff = first_difference(run(hpz, EngineKind::Zero3), reference)) {
    RC_FAIL(fmt::format("hpz (partitions of {}): {}", hpz.features.hpz_partition_ranks, *diff));
  }
}

// For any shape (sizes not divisible by W included), world 1..8 on nodes of any size that divides
// it, 1..5 steps and hyperparameters: every stage's (and HSDP's and hpZ's) final parameters, Adam
// moments (re-assembled from shards), per-step losses and gradient norms are the reference's, bit
// for bit; the reference on one CPU thread per rank, the stages on 1..3, with the kernels cut at
// either grain (the fine one splits even these small shapes, so the threads share every kernel).
RC_GTEST_PROP(Equivalence, prop_every_stage_is_bitwise_the_reference, (TrainConfig config)) {
  config.kernel_grain = *rc::gen::element(cpu::Grain::Normal, cpu::Grain::Fine);
  config.threads = 1;
  const auto reference = run(config, EngineKind::Reference);
  config.threads = *rc::gen::inRange(1, 4);
  RC_LOG() << "threads " << config.threads << " fine grain "
           << (config.kernel_grain == cpu::Grain::Fine) << "\n";
  for (const EngineKind stage : kStages) {
    if (const auto diff = first_difference(run(config, stage), reference)) {
      RC_FAIL(fmt::format("{}: {}", engine_name(stage), *diff));
    }
  }
  check_hybrid_engines(config, reference);
}

// Worlds of nodes past the properties' 8 ranks: 9..16 ranks, nodes of any size that divides
// them (one rank a node up to the whole world), HSDP in nodes and hpZ in any partition that fits
// them: each is the reference's bits.
RC_GTEST_PROP(Equivalence, prop_hybrid_engines_are_bitwise_the_reference_up_to_sixteen_ranks,
              (TrainConfig config)) {
  config.world = *rc::gen::inRange(9, 17);
  config.gpus_per_node = *rc::gen_gpus_per_node(config.world);
  config.steps = std::min<std::int64_t>(config.steps, 2);
  config.threads = 1;
  check_hybrid_engines(config, run(config, EngineKind::Reference));
}

// The comparison can fail: runs that differ in what they compute do differ in bits.
TEST(Equivalence, ComparisonSeesRealDifferences) {
  const TrainConfig config = small_config();
  const auto zero3 = run(config, EngineKind::Zero3);
  TrainConfig other_world = config;
  other_world.world = 2;  // a different global batch
  EXPECT_TRUE(first_difference(run(other_world, EngineKind::Reference), zero3));
  TrainConfig other_lr = config;
  other_lr.adamw.lr = 0.0500001;
  EXPECT_TRUE(first_difference(run(other_lr, EngineKind::Zero3), zero3));
  EXPECT_TRUE(first_difference("params", initial_params(config), zero3.final_state.params));
}

// A world larger than the smallest unit: some shards are all padding, and it still works.
TEST(Equivalence, ShardsMayBeAllPadding) {
  TrainConfig config = small_config();
  config.mlp = {.layers = 1, .width = 1, .in = 1, .classes = 2};  // 4 parameters
  config.world = 8;
  const auto reference = run(config, EngineKind::Reference);
  for (const EngineKind stage : kStages) {
    const auto result = run(config, stage);
    EXPECT_FALSE(first_difference(result, reference)) << engine_name(stage);
    EXPECT_EQ(result.layout[0].shard_elems, kNormBlockElems);
  }
}

TEST(Equivalence, DemoShapeLearns) {
  TrainConfig config;
  config.world = 4;
  config.steps = 60;
  config.mlp = {.layers = 3, .width = 64, .in = 16, .classes = 8};
  config.adamw.lr = 3e-3;
  const auto result = run(config, EngineKind::Zero3);
  EXPECT_LT(result.steps.back().loss, 0.5f * result.steps.front().loss);
}

}  // namespace
}  // namespace zl
