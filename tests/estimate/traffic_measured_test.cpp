// traffic_measured_test.cpp — the traffic estimate is what the engines send: after a real run on
// the sim backend, every rank's traffic ledger holds, per link level and per collective kind,
// exactly the steps times estimate_traffic's bytes, plus the colors of the group splits the run
// makes once at its start. For every stage, precision, accumulation, persistence and bucket size,
// on the MLP and GPT-2 (whose tied LM head is gathered twice), and for hybrid sharding, hpZ, qwZ
// and qgZ on worlds of nodes.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engines/estimate.hpp"
#include "engines/estimate_traffic.hpp"
#include "run/train.hpp"
#include "support/arbitrary.hpp"

namespace zl {
namespace {

const MlpConfig kMlp{.layers = 3, .width = 11, .in = 7, .classes = 5};  // units of 88, 132, 60

TrainConfig run_of(ModelKind model, EngineKind engine, int world, int gpus,
                   const TrainingFeatures& features) {
  TrainConfig config;
  config.model = model;
  config.mlp = kMlp;
  config.gpt = gpt_preset("tiny");
  config.engine = engine;
  config.world = world;
  config.gpus_per_node = gpus;
  config.steps = 2;
  config.micro_batch = 2;
  config.features = features;
  config.features.node_ranks = gpus;
  config.seed = 5;
  return config;
}

// How many times the engine splits the world (each split all_gathers every rank's color, 8
// bytes, once): a shard group's nodes and replicas, hpZ's partitions, qgZ's two levels.
int splits_of(const TrainConfig& config) {
  const TrainingFeatures& f = config.features;
  const int w = config.world;
  const bool nodes = config.gpus_per_node > 0 && config.gpus_per_node < w;
  if (config.engine == EngineKind::Ddp) return 0;
  if (f.shard_group_ranks > 0 && f.shard_group_ranks < w) return 2;
  if (config.engine != EngineKind::Zero3) return 0;
  return (f.hpz_partition_ranks > 1 ? 1 : 0) + (f.quantized_gradients && nodes ? 2 : 0);
}

void expect_ledgers_equal_the_estimate(const TrainConfig& config) {
  const std::vector<UnitSpec> units =
      config.model == ModelKind::Gpt ? checked_units(config.gpt) : checked_units(config.mlp);
  const TrafficWorld world{.world = config.world,
                           .gpus_per_node = config.gpus_per_node,
                           .forward_order = config.model == ModelKind::Gpt
                                                ? gpt_forward_order(config.gpt)
                                                : std::vector<int>{}};
  const TrainResult result = train(config);
  const int nodes = config.gpus_per_node > 0 ? config.world / config.gpus_per_node : 1;
  for (const auto& rank : result.ranks) {
    const TrafficEstimate estimate =
        estimate_traffic(units, world, config.features, stage_of(config.engine), rank.rank);
    SCOPED_TRACE(fmt::format("{} {} W={} G={} {} accum {} rank {}", model_name(config.model),
                             estimate.engine, config.world, config.gpus_per_node,
                             dtype_name(config.features.precision),
                             config.features.grad_accum_steps, rank.rank));
    const std::int64_t colors =
        splits_of(config) *
        ring_volume(CollectiveKind::AllGather, config.world, 8, rank.rank, config.world).sent_bytes;
    for (int l = 0; l < kLinkLevelCount; ++l) {
      const auto level = static_cast<LinkLevel>(l);
      const std::int64_t once = level == link_level_of(config.world, nodes) ? colors : 0;
      EXPECT_EQ(rank.traffic.sent_bytes(level), config.steps * estimate.sent_bytes(level) + once)
          << link_level_name(level);
    }
    for (int k = 0; k < kCollectiveKindCount; ++k) {
      const auto kind = static_cast<CollectiveKind>(k);
      std::int64_t per_step = 0;
      for (const TrafficTerm& term : estimate.terms) {
        if (term.kind == kind) per_step += term.sent_bytes;
      }
      const std::int64_t once = kind == CollectiveKind::AllGather ? colors : 0;
      EXPECT_EQ(rank.traffic.sent_bytes(kind), config.steps * per_step + once)
          << collective_name(kind);
    }
  }
}

TEST(TrafficMeasured, EveryStageSendsTheEstimate) {
  for (const ModelKind model : {ModelKind::Mlp, ModelKind::Gpt}) {
    for (const EngineKind engine :
         {EngineKind::Ddp, EngineKind::Zero1, EngineKind::Zero2, EngineKind::Zero3}) {
      for (const int world : {1, 3, 4}) {
        for (const DType precision : {DType::F32, DType::BF16, DType::F16}) {
          for (const std::int64_t accum : {1, 2}) {
            TrainingFeatures features;
            features.precision = precision;
            features.grad_accum_steps = accum;
            expect_ledgers_equal_the_estimate(run_of(model, engine, world, kOneNode, features));
          }
        }
      }
    }
  }
}

// Units below the threshold stay whole under ZeRO-3 (gathered once a step, after the update),
// flat and in shard groups; all_reduces cut in buckets round each piece's ring on its own.
TEST(TrafficMeasured, PersistentUnitsAndSmallBucketsSendTheEstimate) {
  for (const EngineKind engine :
       {EngineKind::Ddp, EngineKind::Zero1, EngineKind::Zero2, EngineKind::Zero3}) {
    for (const int world : {3, 4}) {
      TrainingFeatures features;
      features.persistence_threshold_elems = 100;  // the MLP's units of 88 and 60
      features.reduce_bucket_elems = 50;
      expect_ledgers_equal_the_estimate(run_of(ModelKind::Mlp, engine, world, kOneNode, features));
      expect_ledgers_equal_the_estimate(run_of(ModelKind::Gpt, engine, world, kOneNode, features));
      if (engine == EngineKind::Ddp || world % 2 != 0) continue;
      TrainingFeatures grouped = features;
      grouped.shard_group_ranks = 2;  // and in shard groups, on nodes of 2
      expect_ledgers_equal_the_estimate(run_of(ModelKind::Mlp, engine, world, 2, grouped));
      expect_ledgers_equal_the_estimate(run_of(ModelKind::Gpt, engine, world, 2, grouped));
      if (engine != EngineKind::Zero3) continue;
      TrainingFeatures zeropp = features;  // and ZeRO++, all three parts
      zeropp.hpz_partition_ranks = 2;
      zeropp.quantized_weights = zeropp.quantized_gradients = true;
      expect_ledgers_equal_the_estimate(run_of(ModelKind::Mlp, engine, world, 2, zeropp));
      zeropp.hpz_partition_ranks = 1;  // qwZ's forward and backward gathers from the world
      expect_ledgers_equal_the_estimate(run_of(ModelKind::Gpt, engine, world, 2, zeropp));
    }
  }
}

// Worlds of nodes: flat stages on them (their rings span the nodes), the shard groups of
// ZeRO-1/2 and HSDP, and ZeRO++'s three parts alone and together.
TEST(TrafficMeasured, WorldsOfNodesSendTheEstimatePerLevel) {
  struct Case {
    int world, gpus;
  };
  for (const auto& [world, gpus] : {Case{4, 2}, Case{6, 3}, Case{8, 2}, Case{4, 1}}) {
    for (const ModelKind model : {ModelKind::Mlp, ModelKind::Gpt}) {
      for (const DType precision : {DType::F32, DType::BF16}) {
        for (const std::int64_t accum : {1, 2}) {
          TrainingFeatures flat;
          flat.precision = precision;
          flat.grad_accum_steps = accum;
          TrainingFeatures grouped = flat;
          grouped.shard_group_ranks = gpus;
          grouped.reduce_bucket_elems = 40;
          for (const EngineKind engine :
               {EngineKind::Ddp, EngineKind::Zero1, EngineKind::Zero2, EngineKind::Zero3}) {
            expect_ledgers_equal_the_estimate(run_of(model, engine, world, gpus, flat));
            if (engine != EngineKind::Ddp) {
              expect_ledgers_equal_the_estimate(run_of(model, engine, world, gpus, grouped));
            }
          }
          for (const int hpz : {1, gpus, world / 2}) {
            for (const int quantized : {0, 1, 2, 3}) {
              TrainingFeatures zeropp = flat;
              zeropp.hpz_partition_ranks = hpz;
              zeropp.quantized_weights = (quantized & 1) != 0;
              zeropp.quantized_gradients = (quantized & 2) != 0;
              if (!uses_zeropp(zeropp)) continue;
              expect_ledgers_equal_the_estimate(
                  run_of(model, EngineKind::Zero3, world, gpus, zeropp));
            }
          }
        }
      }
    }
  }
}

// A shard group's optimizer updates, swap files and host copies are counted in the rank's one
// ledger: in nodes of G, each rank holds the shards a flat world of G holds, so it swaps and
// copies exactly as many bytes as that world's rank of the same node rank.
TEST(TrafficMeasured, AShardGroupsSwapsAndCopiesCountInTheRanksLedger) {
  for (const EngineKind engine : {EngineKind::Zero1, EngineKind::Zero2, EngineKind::Zero3}) {
    TrainingFeatures features;
    features.offload_optimizer = true;
    features.nvme_path = rc::nvme_test_folder();
    features.offload_param = engine == EngineKind::Zero3;
    features.pipeline_read = features.pipeline_write = engine != EngineKind::Zero1;
    const TrainResult flat = train(run_of(ModelKind::Gpt, engine, 2, kOneNode, features));
    features.shard_group_ranks = 2;
    const TrainResult grouped = train(run_of(ModelKind::Gpt, engine, 4, 2, features));
    for (const auto& rank : grouped.ranks) {
      SCOPED_TRACE(fmt::format("{} rank {}", engine_name(engine), rank.rank));
      const TrafficLedger& want = flat.ranks.at(static_cast<std::size_t>(rank.rank % 2)).traffic;
      const TrafficLedger& got = rank.traffic;
      EXPECT_GT(got.disk_bytes(DiskIo::Read), 0);
      EXPECT_EQ(got.disk_bytes(DiskIo::Read), want.disk_bytes(DiskIo::Read));
      EXPECT_EQ(got.disk_bytes(DiskIo::Write), want.disk_bytes(DiskIo::Write));
      EXPECT_EQ(got.swapped_updates().updates, want.swapped_updates().updates);
      EXPECT_EQ(got.swapped_updates().read_bytes, want.swapped_updates().read_bytes);
      EXPECT_EQ(got.swapped_updates().written_bytes, want.swapped_updates().written_bytes);
      EXPECT_EQ(got.to_host_bytes(), want.to_host_bytes());
      EXPECT_EQ(got.to_device_bytes(), want.to_device_bytes());
    }
  }
}

}  // namespace
}  // namespace zl
