// ledger_test.cpp — measured memory and traffic against the ZeRO paper's closed forms, exactly.
// fp32 training, Psi = padded parameters, N = world:
//   memory per rank   params   grads    Adam (m, v)
//     DDP (stage 0)   4 Psi    4 Psi    8 Psi
//     ZeRO-1          4 Psi    4 Psi    8 Psi / N
//     ZeRO-2          4 Psi    4 Psi/N  8 Psi / N   (+ one unit's full gradient while it is reduced)
//     ZeRO-3          4 Psi/N  4 Psi/N  8 Psi / N   (+ one unit's gathered parameters while it runs)
//   bytes sent per rank and step: 2 (N-1)/N 4 Psi for stages 0-2, 3 (N-1)/N 4 Psi for ZeRO-3,
//   plus, for stages 1-3 (gradients are sharded after the reduce-scatter), the gradient-norm partials ((N-1)/N of Psi/64 doubles, all-gathered),
//   plus the logged loss (one float all-reduced: ranks 0..N-2 send it twice, rank N-1 never).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <mutex>
#include <tuple>

#include "engines/estimate.hpp"
#include "engines/sharding.hpp"
#include "run/train.hpp"

namespace zl {
namespace {

// What each stage shards, and how many Psi-sized ring passes it makes per step.
struct Expected {
  EngineKind engine;
  bool adam_sharded;
  bool grads_sharded;
  bool params_sharded;
  int ring_passes;
};

constexpr Expected kStages[] = {
    {EngineKind::Ddp, false, false, false, 2},
    {EngineKind::Zero1, true, false, false, 2},
    {EngineKind::Zero2, true, true, false, 2},
    {EngineKind::Zero3, true, true, true, 3},
};

TrainConfig config_for(EngineKind engine, int world) {
  TrainConfig config;
  config.engine = engine;
  config.world = world;
  config.steps = 2;
  config.micro_batch = 3;
  config.mlp = {.layers = 3, .width = 11, .in = 7, .classes = 5};  // units of 88, 132, 60 elements
  config.seed = 5;
  return config;
}

std::int64_t largest_unit(const std::vector<UnitLayout>& layout) {
  std::int64_t largest = 0;
  for (const auto& unit : layout) largest = std::max(largest, unit.padded_elems);
  return largest;
}

TEST(Ledgers, ModelStateBytesMatchTheClosedForms) {
  for (const int world : {1, 2, 3, 4, 8}) {
    for (const Expected& stage : kStages) {
      const auto result = train(config_for(stage.engine, world));
      const std::int64_t psi = total_padded_elems(result.layout);
      ASSERT_EQ(psi % world, 0);
      const std::int64_t params = stage.params_sharded ? 4 * psi / world : 4 * psi;
      const std::int64_t grads = stage.grads_sharded ? 4 * psi / world : 4 * psi;
      const std::int64_t adam = stage.adam_sharded ? 8 * psi / world : 8 * psi;
      for (const auto& rank : result.ranks) {
        SCOPED_TRACE(fmt::format("{} W={} rank {}", engine_name(stage.engine), world, rank.rank));
        EXPECT_EQ(rank.memory.current_bytes(MemCategory::Params), params);
        EXPECT_EQ(rank.memory.current_bytes(MemCategory::Grads), grads);
        EXPECT_EQ(rank.memory.current_bytes(MemCategory::Optimizer), adam);
        EXPECT_EQ(rank.memory.current_bytes(MemCategory::Gathered), 0);
        EXPECT_EQ(rank.memory.current_bytes(MemCategory::Master), 0);
        const std::int64_t unit_bytes = 4 * largest_unit(result.layout);
        // Temporaries: ZeRO-2/3 hold one unit's full gradient at a time, ZeRO-3 one unit's
        // parameters: the largest unit, never the model.
        EXPECT_EQ(rank.memory.peak_bytes(MemCategory::Grads), grads + (stage.grads_sharded ? unit_bytes : 0));
        EXPECT_EQ(rank.memory.peak_bytes(MemCategory::Gathered), stage.params_sharded ? unit_bytes : 0);
      }
    }
  }
}

// `zerolab estimate` on the padded parameter count predicts each rank's model-state bytes exactly.
TEST(Ledgers, MeasuredModelStatesEqualTheEstimator) {
  for (const int world : {1, 3, 8}) {
    for (const Expected& stage : kStages) {
      const auto result = train(config_for(stage.engine, world));
      const EstimateConfig estimate_config{.params = total_padded_elems(result.layout),
                                           .world = world,
                                           .dtype = StateDtype::Fp32,
                                           .optimizer_bytes_per_param = 8};
      const StageEstimate estimate = estimate_stage(estimate_config, stage_of(stage.engine));
      for (const auto& rank : result.ranks) {
        SCOPED_TRACE(fmt::format("{} W={} rank {}", engine_name(stage.engine), world, rank.rank));
        EXPECT_EQ(rank.memory.current_bytes(MemCategory::Params), estimate.params_bytes);
        EXPECT_EQ(rank.memory.current_bytes(MemCategory::Grads), estimate.grads_bytes);
        EXPECT_EQ(rank.memory.current_bytes(MemCategory::Optimizer), estimate.optimizer_bytes);
      }
    }
  }
}

TEST(Ledgers, BytesSentMatchTheRingVolumes) {
  for (const int world : {1, 2, 3, 4, 8}) {
    for (const Expected& stage : kStages) {
      const TrainConfig config = config_for(stage.engine, world);
      const auto result = train(config);
      const std::int64_t psi_bytes = 4 * total_padded_elems(result.layout);
      const std::int64_t model_state = stage.ring_passes * (world - 1) * psi_bytes / world;
      // the norm's all_gather: each rank's tree sums, a few doubles per unit
      const std::int64_t norm_bytes =
          stage.adam_sharded ? (world - 1) * norm_sums_per_rank(result.layout, world) * 8 : 0;
      for (const auto& rank : result.ranks) {
        SCOPED_TRACE(fmt::format("{} W={} rank {}", engine_name(stage.engine), world, rank.rank));
        const std::int64_t loss_bytes = (world > 1 && rank.rank != world - 1) ? 2 * 4 : 0;
        EXPECT_EQ(rank.traffic.sent_bytes(), config.steps * (model_state + norm_bytes + loss_bytes));
        if (stage.engine == EngineKind::Ddp) continue;
        // The model-state part alone, per collective kind.
        EXPECT_EQ(rank.traffic.sent_bytes(CollectiveKind::ReduceScatter),
                  config.steps * (world - 1) * psi_bytes / world);
        EXPECT_EQ(rank.traffic.sent_bytes(CollectiveKind::AllGather),
                  config.steps * ((stage.ring_passes - 1) * (world - 1) * psi_bytes / world + norm_bytes));
        EXPECT_EQ(rank.traffic.calls(CollectiveKind::ReduceScatter),
                  config.steps * static_cast<std::int64_t>(result.layout.size()));
      }
    }
  }
}

// Hybrid sharding's bytes by the links they cross, exactly. Inside a node: ZeRO-3's three ring
// passes among the node's G ranks over the layout padded for G, and the norm's tree sums. Across
// the nodes: one fp32 all_reduce of each unit's shard among the N nodes. Spanning both: the
// world's calls, the logged loss and the two splits' colors (once, at the start).
TEST(Ledgers, HybridShardingSendsZeroThreeInsideAndOneShardAllReduceAcross) {
  for (const auto& [world, gpus] :
       {std::pair{4, 2}, std::pair{6, 3}, std::pair{8, 2}, std::pair{4, 1}}) {
    TrainConfig config = config_for(EngineKind::Zero3, world);
    config.gpus_per_node = gpus;
    config.features.shard_group_ranks = gpus;
    const auto result = train(config);
    const std::vector<UnitLayout> layout = layout_units(checked_units(config.mlp), gpus);
    const std::int64_t psi_bytes = 4 * total_padded_elems(layout);
    const int nodes = world / gpus;
    const LinkLevel world_level = link_level_of(world, nodes);
    for (const auto& rank : result.ranks) {
      SCOPED_TRACE(fmt::format("W={} G={} rank {}", world, gpus, rank.rank));
      const int node = rank.rank / gpus;
      const std::int64_t inside =
          3 * (gpus - 1) * psi_bytes / gpus + (gpus - 1) * norm_sums_per_rank(layout, gpus) * 8;
      std::int64_t across = 0;
      for (const auto& unit : layout) {
        across +=
            ring_volume(CollectiveKind::AllReduce, unit.shard_elems, 4, node, nodes).sent_bytes;
      }
      const std::int64_t spanning =
          config.steps * ring_volume(CollectiveKind::AllReduce, 1, 4, rank.rank, world).sent_bytes +
          2 * ring_volume(CollectiveKind::AllGather, world, 8, rank.rank, world).sent_bytes;
      std::map<LinkLevel, std::int64_t> want = {{LinkLevel::Inside, config.steps * inside},
                                                {LinkLevel::Across, config.steps * across},
                                                {LinkLevel::Spanning, 0}};
      want[world_level] += spanning;
      for (const auto& [level, bytes] : want) {
        EXPECT_EQ(rank.traffic.sent_bytes(level), bytes) << link_level_name(level);
      }
      EXPECT_EQ(rank.traffic.sent_bytes(),
                want[LinkLevel::Inside] + want[LinkLevel::Across] + want[LinkLevel::Spanning]);
    }
  }
}

// ZeRO++'s hpZ moves ZeRO-3's bytes, but its backward gathers run among the K ranks of a
// partition: with K a node's ranks, one of ZeRO-3's three ring passes stays inside the node. Its
// ledger, exactly: the world's forward all_gather and reduce_scatter (Psi (W-1)/W each) at the
// world's level, the backward all_gather (Psi (K-1)/K) at the partition's, and the norm's tree
// sums, the logged loss and the one split's colors at the world's.
TEST(Ledgers, HpzKeepsBackwardGathersInsideItsPartition) {
  for (const auto& [world, gpus, partition] :
       {std::tuple{4, 2, 2}, std::tuple{8, 4, 4}, std::tuple{8, 2, 4}, std::tuple{6, 3, 3},
        std::tuple{4, 4, 2}}) {
    TrainConfig config = config_for(EngineKind::Zero3, world);
    config.gpus_per_node = gpus;
    config.features.hpz_partition_ranks = partition;
    const auto result = train(config);
    const std::int64_t psi_bytes = 4 * total_padded_elems(result.layout);
    const LinkLevel world_level = link_level_of(world, world / gpus);
    const LinkLevel partition_level =
        link_level_of(partition, partition <= gpus ? 1 : partition / gpus);
    for (const auto& rank : result.ranks) {
      SCOPED_TRACE(fmt::format("W={} G={} K={} rank {}", world, gpus, partition, rank.rank));
      const std::int64_t world_bytes =
          config.steps *
              (2 * (world - 1) * psi_bytes / world +
               (world - 1) * norm_sums_per_rank(result.layout, world) * 8 +
               ring_volume(CollectiveKind::AllReduce, 1, 4, rank.rank, world).sent_bytes) +
          ring_volume(CollectiveKind::AllGather, world, 8, rank.rank, world).sent_bytes;
      const std::int64_t partition_bytes = config.steps * (partition - 1) * psi_bytes / partition;
      std::map<LinkLevel, std::int64_t> want = {
          {LinkLevel::Inside, 0}, {LinkLevel::Across, 0}, {LinkLevel::Spanning, 0}};
      want[world_level] += world_bytes;
      want[partition_level] += partition_bytes;
      for (const auto& [level, bytes] : want) {
        EXPECT_EQ(rank.traffic.sent_bytes(level), bytes) << link_level_name(level);
      }
      EXPECT_EQ(rank.traffic.sent_bytes(CollectiveKind::AllGather),
                config.steps * ((world - 1) * psi_bytes / world +
                                (world - 1) * norm_sums_per_rank(result.layout, world) * 8) +
                    partition_bytes +
                    ring_volume(CollectiveKind::AllGather, world, 8, rank.rank, world).sent_bytes);
    }
  }
}

// Events of rank 0 with the ledger's current bytes at each.
struct Moment {
  std::string phase;
  int unit;
  std::int64_t grads_bytes;
  std::int64_t gathered_bytes;
};

std::vector<Moment> moments_of_rank0(const TrainConfig& config, TrainResult* result) {
  std::vector<Moment> moments;
  *result = train(config, {}, [&](int rank, const EngineEvent& event, const MemoryLedger& ledger) {
    if (rank != 0) return;
    moments.push_back({std::string(event.phase), event.unit, ledger.current_bytes(MemCategory::Grads),
                       ledger.current_bytes(MemCategory::Gathered)});
  });
  return moments;
}

// ZeRO-2 reduce-scatters each unit during backward, as soon as its gradients are ready, and
// holds that unit's full gradient only until then.
TEST(Ledgers, Zero2ReducesUnitByUnitDuringBackward) {
  TrainConfig config = config_for(EngineKind::Zero2, 4);
  config.steps = 1;
  TrainResult result;
  const auto moments = moments_of_rank0(config, &result);
  const std::int64_t shard_bytes = 4 * total_padded_elems(result.layout) / 4;
  std::vector<std::string> backward_order;
  for (const auto& m : moments) {
    if (m.phase == "backward") {
      EXPECT_EQ(m.grads_bytes, shard_bytes + 4 * result.layout[m.unit].padded_elems) << "unit " << m.unit;
    }
    if (m.phase == "backward" || m.phase == "reduce_scatter") {
      backward_order.push_back(fmt::format("{}{}", m.phase, m.unit));
    }
    if (m.phase == "update") {
      EXPECT_EQ(m.grads_bytes, shard_bytes);
    }
  }
  const std::vector<std::string> interleaved = {"backward2", "reduce_scatter2", "backward1",
                                                "reduce_scatter1", "backward0", "reduce_scatter0"};
  EXPECT_EQ(backward_order, interleaved);
}

// ZeRO-3 gathers a unit just before it runs and releases it right after, in both passes.
TEST(Ledgers, Zero3GathersOneUnitAtATime) {
  TrainConfig config = config_for(EngineKind::Zero3, 4);
  config.steps = 1;
  TrainResult result;
  const auto moments = moments_of_rank0(config, &result);
  int gathers = 0;
  for (const auto& m : moments) {
    if (m.phase == "gather") ++gathers;
    if (m.phase == "gather" || m.phase == "forward" || m.phase == "backward") {
      EXPECT_EQ(m.gathered_bytes, 4 * result.layout[m.unit].padded_elems) << m.phase << " " << m.unit;
    }
    if (m.phase == "update") {
      EXPECT_EQ(m.gathered_bytes, 0);
    }
  }
  EXPECT_EQ(gathers, 2 * static_cast<int>(result.layout.size()));  // forward and backward
}

}  // namespace
}  // namespace zl
