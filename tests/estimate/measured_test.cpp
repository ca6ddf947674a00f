// measured_test.cpp — the estimate is what the engines allocate: after a real run on the sim
// backend, every rank's memory ledger holds exactly LedgerEstimate's params, grads, master and
// optimizer bytes, for every stage, precision, accumulation and persistence threshold, on the MLP
// and on GPT-2.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "engines/estimate.hpp"
#include "run/train.hpp"

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
          const TrainResult result = train(small_run(model, engine, world, features));
          const LedgerEstimate estimate = estimate_ledger(elems, options, stage_of(engine));
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

TEST(EstimateMeasured, MlpLedgersEqualTheEstimate) {
  expect_ledgers_equal_the_estimate(ModelKind::Mlp, 0);
  expect_ledgers_equal_the_estimate(ModelKind::Mlp, 100);  // layers 0 and 2 persist
}

TEST(EstimateMeasured, GptLedgersEqualTheEstimate) {
  expect_ledgers_equal_the_estimate(ModelKind::Gpt, 0);
  expect_ledgers_equal_the_estimate(ModelKind::Gpt, 3'000);  // embeddings and ln_f persist
}

}  // namespace
}  // namespace zl
