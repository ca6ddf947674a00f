// measured_test.cpp — the estimate is what the engines allocate: after a real run on the sim
// backend, every rank's memory ledger holds exactly LedgerEstimate's params, grads, master and
// optimizer bytes, for every stage, precision, accumulation and persistence threshold, on the MLP
// and on GPT-2, and offloaded, its host and NVMe categories; and its activations peaked at exactly
// ActivationEstimate's bytes, kind by kind; so do hybrid sharding's and hpZ's.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engines/estimate.hpp"
#include "engines/estimate_activations.hpp"
#include "run/train.hpp"
#include "support/arbitrary.hpp"

namespace zl {
namespace {

constexpr EngineKind kEngines[] = {EngineKind::Ddp, EngineKind::Zero1, EngineKind::Zero2,
                                   EngineKind::Zero3};

const MlpConfig kMlp{.layers = 3, .width = 11, .in = 7, .classes = 5};  // units of 88, 132, 60
constexpr const char* kGptPreset = "tiny";  // units of 2,560, 12,704, 12,704, 64 elements

// One step of a small run; the ledgers are read while the engines still hold their state.
TrainConfig small_run(ModelKind model, EngineKind engine, int world, const TrainingFeatures& f) {
  TrainConfig config;
  config.model = model;
  config.mlp = kMlp;
  config.gpt = gpt_preset(kGptPreset);
  config.engine = engine;
  config.world = world;
  config.steps = 1;
  config.micro_batch = 2;
  config.features = f;
  config.seed = 3;
  return config;
}

// Every rank's activations at their peak, kind by kind, are the estimate's.
void expect_activations(const TrainResult& result, const ActivationEstimate& estimate) {
  for (const auto& rank : result.ranks) {
    SCOPED_TRACE(fmt::format("rank {}", rank.rank));
    EXPECT_EQ(rank.memory.peak_bytes(MemCategory::Activations), estimate.total_bytes());
    EXPECT_EQ(rank.memory.peak_bytes(MemCategory::HostActivations), estimate.host_bytes);
    for (int k = 0; k < kActivationKindCount; ++k) {
      const auto kind = static_cast<ActivationKind>(k);
      EXPECT_EQ(rank.memory.activation_bytes_at_peak(kind), estimate.bytes_of(kind))
          << activation_kind_name(kind);
    }
  }
}

ActivationEstimate activations_of(const TrainConfig& config) {
  return config.model == ModelKind::Mlp
             ? estimate_activations(config.mlp, config.micro_batch)
             : estimate_activations(config.gpt, config.micro_batch, config.gpt.block_size,
                                    config.activations, config.features.precision);
}

void expect_ledgers_equal_the_estimate(ModelKind model, std::int64_t threshold) {
  const auto units =
      model == ModelKind::Mlp ? checked_units(kMlp) : checked_units(gpt_preset(kGptPreset));
  for (const int world : {1, 3}) {
    for (const DType precision : {DType::F32, DType::BF16, DType::F16}) {
      for (const std::int64_t accum : {1, 2}) {
        TrainingFeatures features;
        features.precision = precision;
        features.grad_accum_steps = accum;
        features.persistence_threshold_elems = threshold;
        const EstimateOptions options = estimate_options(features);
        const StateElems elems = state_elems(units, world, options);
        for (const EngineKind engine : kEngines) {
          const TrainConfig config = small_run(model, engine, world, features);
          const TrainResult result = train(config);
          const LedgerEstimate estimate = estimate_ledger(elems, options, stage_of(engine));
          expect_activations(result, activations_of(config));
          for (const auto& rank : result.ranks) {
            SCOPED_TRACE(fmt::format("{} {} W={} {} accum {} threshold {} rank {}",
                                     model_name(model), engine_name(engine), world,
                                     dtype_name(precision), accum, threshold, rank.rank));
            EXPECT_EQ(rank.memory.current_bytes(MemCategory::Params), estimate.params_bytes);
            EXPECT_EQ(rank.memory.current_bytes(MemCategory::Grads), estimate.grads_bytes);
            EXPECT_EQ(rank.memory.current_bytes(MemCategory::Master), estimate.master_bytes);
            EXPECT_EQ(rank.memory.current_bytes(MemCategory::Optimizer), estimate.optimizer_bytes);
          }
        }
      }
    }
  }
}

// Offloaded (the optimizer to host memory or NVMe, ZeRO-3's parameter shards to host memory, or
// with the optimizer on NVMe to NVMe too), every rank's host and NVMe categories hold what the
// estimate places there once the step is done, and the device's categories the rest, fp32 (which
// gets a master) and bf16, with and without ZeRO-3's persistent units.
TEST(EstimateMeasured, OffloadedLedgersEqualTheEstimate) {
  const auto units = checked_units(gpt_preset(kGptPreset));
  for (const int world : {1, 3}) {
    for (const DType precision : {DType::F32, DType::BF16}) {
      for (const bool nvme : {false, true}) {
        for (const std::int64_t threshold : {0, 3'000}) {
          for (const EngineKind engine : kEngines) {
            TrainingFeatures features;
            features.precision = precision;
            features.persistence_threshold_elems = threshold;
            features.offload_optimizer = true;
            if (nvme) features.nvme_path = rc::nvme_test_folder();
            features.offload_param = engine == EngineKind::Zero3;
            if (nvme && features.offload_param) features.param_nvme_path = rc::nvme_test_folder();
            // with persistence, 3 swap buffers and the first shards of up to 5,000 elements in
            // host memory
            features.param_buffer_count = threshold == 0 ? 5 : 3;
            features.param_max_in_cpu_elems = threshold == 0 ? 0 : 5'000;
            const EstimateOptions options = estimate_options(features);
            const LedgerEstimate estimate =
                estimate_ledger(state_elems(units, world, options), options, stage_of(engine));
            const TrainResult result = train(small_run(ModelKind::Gpt, engine, world, features));
            for (const auto& rank : result.ranks) {
              SCOPED_TRACE(fmt::format("{} W={} {} {} threshold {} rank {}", engine_name(engine),
                                       world, dtype_name(precision), nvme ? "nvme" : "cpu",
                                       threshold, rank.rank));
              const auto& memory = rank.memory;
              EXPECT_EQ(memory.current_bytes(MemCategory::Params), estimate.params_bytes);
              EXPECT_EQ(memory.current_bytes(MemCategory::Grads), estimate.grads_bytes);
              EXPECT_EQ(memory.current_bytes(MemCategory::Master), estimate.master_bytes);
              EXPECT_EQ(memory.current_bytes(MemCategory::Optimizer), estimate.optimizer_bytes);
              EXPECT_EQ(memory.current_bytes(MemCategory::HostParams), estimate.host_params_bytes);
              EXPECT_EQ(memory.current_bytes(MemCategory::HostMaster), estimate.host_master_bytes);
              EXPECT_EQ(memory.current_bytes(MemCategory::HostOptimizer),
                        estimate.host_optimizer_bytes);
              EXPECT_EQ(memory.current_bytes(MemCategory::NvmeMaster), estimate.nvme_master_bytes);
              EXPECT_EQ(memory.current_bytes(MemCategory::NvmeOptimizer),
                        estimate.nvme_optimizer_bytes);
              EXPECT_EQ(memory.current_bytes(MemCategory::NvmeParams), estimate.nvme_params_bytes);
            }
          }
        }
      }
    }
  }
}

// Hybrid sharding holds ZeRO-3's states of a world of its G node ranks; hpZ those of the whole
// world plus the secondary shards, Ψp/K in the training dtype: every rank's ledger is the
// estimate's, on the MLP and GPT-2, in fp32 and bf16.
TEST(EstimateMeasured, HybridAndHpzLedgersEqualTheEstimate) {
  // Hybrid sharding at ZeRO-1, 2 and 3 (the states of a node's G ranks), hpZ at ZeRO-3.
  constexpr std::pair<bool, int> kWays[] = {{false, 1}, {false, 2}, {false, 3}, {true, 3}};
  for (const ModelKind model : {ModelKind::Mlp, ModelKind::Gpt}) {
    const auto units =
        model == ModelKind::Mlp ? checked_units(kMlp) : checked_units(gpt_preset(kGptPreset));
    for (const auto& [world, gpus] : {std::pair{4, 2}, std::pair{6, 3}, std::pair{8, 4}}) {
      for (const DType precision : {DType::F32, DType::BF16}) {
        for (const auto& [hpz, stage] : kWays) {
          TrainingFeatures features;
          features.precision = precision;
          // ZeRO-3's units below the threshold whole (the MLP's 88 and 60, the GPT's 64)
          features.persistence_threshold_elems = stage == 3 && world == 6 ? 100 : 0;
          (hpz ? features.hpz_partition_ranks : features.shard_group_ranks) = gpus;
          TrainConfig config = small_run(model, engine_of_stage(stage), world, features);
          config.gpus_per_node = gpus;
          const EstimateOptions options = estimate_options(features);
          const LedgerEstimate estimate =
              estimate_ledger(state_elems(units, hpz ? world : gpus, options), options, stage);
          const TrainResult result = train(config);
          for (const auto& rank : result.ranks) {
            SCOPED_TRACE(fmt::format("{} {} stage {} W={} G={} {} threshold {} rank {}",
                                     model_name(model), hpz ? "hpz" : "hybrid", stage, world, gpus,
                                     dtype_name(precision), features.persistence_threshold_elems,
                                     rank.rank));
            EXPECT_EQ(rank.memory.current_bytes(MemCategory::Params), estimate.params_bytes);
            EXPECT_EQ(rank.memory.current_bytes(MemCategory::Grads), estimate.grads_bytes);
            EXPECT_EQ(rank.memory.current_bytes(MemCategory::Master), estimate.master_bytes);
            EXPECT_EQ(rank.memory.current_bytes(MemCategory::Optimizer), estimate.optimizer_bytes);
          }
        }
      }
    }
  }
}

TEST(EstimateMeasured, MlpLedgersEqualTheEstimate) {
  expect_ledgers_equal_the_estimate(ModelKind::Mlp, 0);
  expect_ledgers_equal_the_estimate(ModelKind::Mlp, 100);  // layers 0 and 2 persist
}

TEST(EstimateMeasured, GptLedgersEqualTheEstimate) {
  expect_ledgers_equal_the_estimate(ModelKind::Gpt, 0);
  expect_ledgers_equal_the_estimate(ModelKind::Gpt, 3'000);  // embeddings and ln_f persist
}

// Activations depend on the micro-batch, the context and the checkpointing policy, not on the
// engine: the reference and every stage at several B and T, three blocks under every policy.
TEST(EstimateMeasured, ActivationsEqualTheEstimateAtEveryMicroBatchContextAndPolicy) {
  for (const std::int64_t micro_batch : {1, 3}) {
    for (const std::int64_t block_size : {5, 16}) {
      for (const EngineKind engine : {EngineKind::Reference, EngineKind::Ddp, EngineKind::Zero3}) {
        TrainConfig config = small_run(ModelKind::Gpt, engine, 2, TrainingFeatures{});
        config.micro_batch = micro_batch;
        config.gpt.block_size = block_size;
        config.gpt.n_layer = 3;
        for (const char* policy : {"none", "full", "every:2", "every:5", "selective"}) {
          config.activations = parse_activation_policy(policy);
          SCOPED_TRACE(fmt::format("gpt B={} T={} {} {}", micro_batch, block_size,
                                   engine_name(engine), policy));
          expect_activations(train(config), activations_of(config));
          if (config.activations.recompute != Recompute::Full) continue;
          config.activations.cpu_checkpoints = true;  // the same checkpoints, in host memory
          expect_activations(train(config), activations_of(config));
        }
        config.activations = {};
        config.model = ModelKind::Mlp;
        expect_activations(train(config), activations_of(config));
      }
    }
  }
}

// Attention keeps two floats per query row and head, never the T x T probabilities, so every
// activation is linear in T: doubling the context exactly doubles the peak (it was about 4x).
TEST(EstimateMeasured, ActivationsGrowLinearlyInTheContext) {
  std::int64_t previous = 0;
  for (const std::int64_t block_size : {128, 256, 512}) {
    TrainConfig config = small_run(ModelKind::Gpt, EngineKind::Zero1, 2, TrainingFeatures{});
    config.gpt.block_size = block_size;
    config.micro_batch = 1;
    const std::int64_t peak = train(config).ranks[0].memory.peak_bytes(MemCategory::Activations);
    if (previous > 0) {
      EXPECT_EQ(peak, 2 * previous) << "T = " << block_size;
    }
    previous = peak;
  }
}

// Full checkpointing keeps one [N, C] tensor per block and one block's worth of workspace: a
// 12-block GPT holds at most a third of the activations it holds without (measured: 21%).
TEST(EstimateMeasured, FullCheckpointingOfTwelveBlocksHoldsAThirdOrLess) {
  TrainConfig config = small_run(ModelKind::Gpt, EngineKind::Zero2, 2, TrainingFeatures{});
  config.gpt.n_layer = 12;
  const std::int64_t without =
      train(config).ranks[0].memory.peak_bytes(MemCategory::Activations);
  config.activations = parse_activation_policy("full");
  const std::int64_t with = train(config).ranks[0].memory.peak_bytes(MemCategory::Activations);
  EXPECT_LE(3 * with, without) << with << " of " << without;
}

}  // namespace
}  // namespace zl
