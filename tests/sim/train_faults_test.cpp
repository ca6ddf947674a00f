// train_faults_test.cpp — faults and non-finite steps in whole training runs. An injected throw,
// skip or slow call at several collectives of every stage ends within a bound with an error naming
// the rank, the collective and its number, and leaves no thread running. A NaN or infinite
// gradient norm (a huge learning rate, a NaN in the data) stops every engine at the same step with
// one message, or with NonFinitePolicy::Skip skips that step everywhere, bit for bit like the
// reference, without advancing Adam's step count.
#include <gtest/gtest.h>
#include <rapidcheck/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <optional>

#include "run/compare.hpp"
#include "model/data.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "sim/sim_test_support.hpp"
#include "support/arbitrary.hpp"
#include "support/fault_timing.hpp"
#include "support/small_config.hpp"

namespace zl {
namespace {

using simtest::baseline_thread_count;
using simtest::settled_thread_count;

constexpr EngineKind kStages[] = {EngineKind::Ddp, EngineKind::Zero1, EngineKind::Zero2,
                                  EngineKind::Zero3};

TrainConfig small_config(EngineKind engine) {
  TrainConfig config = ::zl::small_config();
  config.engine = engine;
  config.collective_timeout = kFaultTimeout;
  return config;
}

// The message of the zl::Error that train(config) throws, or "" (a test failure) if none.
std::string train_error(const TrainConfig& config) {
  try {
    train(config);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "train() did not throw";
  return "";
}

// Collectives each stage makes (DDP only all-reduces), at early and late positions.
std::vector<std::string> fault_sites(EngineKind engine) {
  if (engine == EngineKind::Ddp) return {"all_reduce:2", "all_reduce:7"};
  return {"all_gather:2", "reduce_scatter:3", "all_reduce:1", "all_gather:9"};
}

// Every kind, at several collectives of every stage: bounded time, the call named, no thread left.
TEST(TrainFaults, every_kind_at_every_stage_ends_with_the_call_named) {
  for (const EngineKind engine : kStages) {
    for (const std::string& site : fault_sites(engine)) {
      for (const std::string kind : {"throw", "skip", "slow"}) {
        TrainConfig config = small_config(engine);
        const std::string spec = fmt::format("rank=1,at={},kind={}", site, kind);
        config.faults = {parse_fault_spec(spec)};
        const int threads_before = baseline_thread_count();
        const auto start = std::chrono::steady_clock::now();
        const std::string error = train_error(config);
        const double seconds =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const std::string at = fmt::format("{} {}", engine_name(engine), spec);
        EXPECT_LT(seconds, kFaultBoundSeconds) << at;
        EXPECT_LE(settled_thread_count(threads_before), threads_before) << at;
        const std::string collective = site.substr(0, site.find(':'));
        const std::string nth = site.substr(site.find(':') + 1);
        EXPECT_TRUE(error.starts_with(
            fmt::format("rank 1: injected fault at {} #{} (call #", collective, nth)))
            << at << ": " << error;
        EXPECT_EQ(error.find('\n'), std::string::npos) << error;
        if (kind == "skip") {
          EXPECT_TRUE(error.find("collective mismatch") != std::string::npos ||
                      error.find("returned after") != std::string::npos)
              << at << ": " << error;
        }
        if (kind == "slow") {
          EXPECT_NE(error.find(fmt::format("timeout after {} ms", kFaultTimeout.count())),
                    std::string::npos)
              << at << ": " << error;
        }
      }
    }
  }
}

// The call number counts every collective of the rank: ZeRO-3's second all_gather is call #2,
// the fifth is the first of the backward's (after 3 forward gathers and one backward pair).
TEST(TrainFaults, call_numbers_follow_the_walkthrough) {
  TrainConfig config = small_config(EngineKind::Zero3);
  config.faults = {parse_fault_spec("rank=2,at=all_gather:2,kind=throw")};
  EXPECT_EQ(train_error(config), "rank 2: injected fault at all_gather #2 (call #2)");
  config.faults = {parse_fault_spec("rank=0,at=all_gather:5,kind=throw")};
  EXPECT_EQ(train_error(config), "rank 0: injected fault at all_gather #5 (call #6)");
}

TEST(TrainFaults, bad_fault_configs_are_named) {
  TrainConfig config = small_config(EngineKind::Zero2);
  config.faults = {parse_fault_spec("rank=3,at=all_gather:1,kind=throw")};
  EXPECT_EQ(train_error(config),
            "--inject-fault rank=3,at=all_gather:1,kind=throw: rank 3 is outside the world of 3 "
            "ranks: use rank 0..2");
  config.faults = {parse_fault_spec("rank=0,at=broadcast:1,kind=throw")};
  EXPECT_EQ(train_error(config),
            "rank 0: fault rank=0,at=broadcast:1,kind=throw never fired: the rank made 0 broadcast "
            "calls");
  config.engine = EngineKind::Reference;
  EXPECT_EQ(train_error(config),
            "--inject-fault needs a distributed engine (--stage 0-3): the reference makes no "
            "collective calls");
  config = small_config(EngineKind::Zero1);
  config.collective_timeout = std::chrono::milliseconds(0);
  EXPECT_EQ(train_error(config),
            "--collective-timeout-ms 0 is invalid: use 1000 or more (a healthy rank waits for its "
            "peers' compute, and on a loaded machine for a core)");
}

// --- non-finite steps ---------------------------------------------------------------------------

// A learning rate of 1e30 blows the parameters up after one step: every engine stops at the same
// step with the same message as the reference.
TEST(NonFinite, huge_learning_rate_stops_every_engine_at_the_same_step) {
  TrainConfig config = small_config(EngineKind::Reference);
  config.adamw.lr = 1e30;
  config.steps = 5;
  const std::string expected = train_error(config);
  EXPECT_EQ(expected,
            "step 2: gradient norm is nan: lower --lr or check the data; --skip-nonfinite skips "
            "such steps");
  for (const EngineKind engine : kStages) {
    config.engine = engine;
    EXPECT_EQ(train_error(config), expected) << engine_name(engine);
  }
}

// With Skip the same runs go on, skip the same steps, and stay bitwise the reference.
TEST(NonFinite, huge_learning_rate_with_skip_stays_bitwise_the_reference) {
  TrainConfig config = small_config(EngineKind::Reference);
  config.adamw.lr = 1e30;
  config.steps = 5;
  config.nonfinite = NonFinitePolicy::Skip;
  const TrainResult reference = train(config);
  ASSERT_EQ(reference.steps.size(), 5u);
  EXPECT_FALSE(reference.steps[0].skipped);
  EXPECT_TRUE(reference.steps[4].skipped);
  for (const EngineKind engine : kStages) {
    config.engine = engine;
    const TrainResult result = train(config);
    EXPECT_FALSE(first_difference(result, reference)) << engine_name(engine);
    for (std::size_t s = 0; s < result.steps.size(); ++s) {
      EXPECT_EQ(result.steps[s].skipped, reference.steps[s].skipped) << engine_name(engine) << s;
    }
  }
}

// A test driver over the engines themselves, so the data can hold a NaN or an infinity.
struct EngineRun {
  ModelState state;                   // empty if the run stopped
  std::vector<StepStats> stats;       // rank 0's
  std::string error;                  // the NonFiniteError message, or ""
  std::vector<std::int64_t> stopped;  // per rank: the 0-based step it stopped at, or -1
};

// The task's batch, with x[0] of rank `bad_rank`'s micro-batch at step `bad_step` set to `value`.
BatchFn poisoned_batches(const TrainConfig& config, std::int64_t bad_step, int bad_rank,
                         float value) {
  const ClassificationTask task{
      .features = config.mlp.in, .classes = config.mlp.classes, .seed = config.seed};
  return [=](std::int64_t step, int rank) {
    Batch batch = task.batch(first_sample_of(step, rank, config.world, config.micro_batch),
                             config.micro_batch);
    if (step == bad_step && rank == bad_rank) batch.x[0] = value;
    return batch;
  };
}

EngineRun run_engine(const TrainConfig& config, const BatchFn& batch) {
  EngineRun run;
  run.stopped.assign(static_cast<std::size_t>(config.world), -1);
  const EngineOptions options{.adamw = config.adamw,
                              .lr_schedule = config.lr_schedule,
                              .seed = config.seed,
                              .batch = batch,
                              .observer = {},
                              .nonfinite = config.nonfinite};
  // Steps `engine` on rank `rank`; false if it stopped at a non-finite step.
  const auto steps = [&](Engine& engine, int rank) {
    for (std::int64_t step = 0; step < config.steps; ++step) {
      try {
        const StepStats stats = engine.step(step);
        if (rank == 0) run.stats.push_back(stats);
      } catch (const NonFiniteError& e) {
        run.stopped[static_cast<std::size_t>(rank)] = e.step();
        if (rank == 0) run.error = e.what();
        return false;
      }
    }
    return true;
  };
  if (config.engine == EngineKind::Reference) {
    CpuDevice device;
    Mlp model(device, config.mlp);
    auto engine = make_reference_engine(model, device, config.world, options);
    if (steps(*engine, 0)) run.state = engine->full_state();
    return run;
  }
  SimWorld world(config.world, SimOptions{.timeout = std::chrono::seconds(10)});
  world.run([&](Comm& comm) {
    CpuDevice device;
    Mlp model(device, config.mlp);
    auto engine = make_engine(config.engine, model, device, comm, options);
    if (!steps(*engine, comm.rank())) return;
    ModelState state = engine->full_state();
    if (comm.rank() == 0) run.state = std::move(state);
  });
  return run;
}

std::optional<std::string> state_difference(const ModelState& a, const ModelState& b) {
  if (auto diff = first_difference("params", a.params, b.params)) return diff;
  if (auto diff = first_difference("exp_avg", a.exp_avg, b.exp_avg)) return diff;
  return first_difference("exp_avg_sq", a.exp_avg_sq, b.exp_avg_sq);
}

// A NaN in one rank's data stops every rank of every engine at that step, with one message.
TEST(NonFinite, nan_in_the_data_stops_every_rank_at_that_step) {
  TrainConfig config = small_config(EngineKind::Reference);
  config.steps = 4;
  const BatchFn batch = poisoned_batches(config, 2, 1, std::numeric_limits<float>::quiet_NaN());
  const EngineRun reference = run_engine(config, batch);
  EXPECT_EQ(reference.error,
            "step 3: gradient norm is nan: lower --lr or check the data; --skip-nonfinite skips "
            "such steps");
  for (const EngineKind engine : kStages) {
    config.engine = engine;
    const EngineRun run = run_engine(config, batch);
    EXPECT_EQ(run.error, reference.error) << engine_name(engine);
    EXPECT_EQ(run.stopped, std::vector<std::int64_t>(3, 2)) << engine_name(engine);
    EXPECT_EQ(run.stats.size(), 2u);
  }
}

// A skipped step changes nothing: a run whose last step is skipped ends where the run one step
// shorter ends, parameters and both moments, bit for bit.
TEST(NonFinite, skipped_step_leaves_parameters_and_moments_unchanged) {
  for (const EngineKind engine : {EngineKind::Reference, EngineKind::Ddp, EngineKind::Zero1,
                                  EngineKind::Zero2, EngineKind::Zero3}) {
    TrainConfig config = small_config(engine);
    config.nonfinite = NonFinitePolicy::Skip;
    const EngineRun poisoned =
        run_engine(config, poisoned_batches(config, 2, 0, std::numeric_limits<float>::infinity()));
    ASSERT_EQ(poisoned.stats.size(), 3u);
    EXPECT_TRUE(poisoned.stats[2].skipped);
    EXPECT_FALSE(std::isfinite(poisoned.stats[2].grad_norm));
    config.steps = 2;
    const EngineRun shorter = run_engine(config, poisoned_batches(config, -1, 0, 0.0f));
    EXPECT_FALSE(state_difference(poisoned.state, shorter.state)) << engine_name(engine);
  }
}

// Neither Adam's step count nor the lr schedule advances on a skipped step (as DeepSpeed's loss
// scaler and scheduler): skipping step 0 and then training on batch B gives exactly what
// training on B as the first step gives, bias correction and the first update's lr included.
TEST(NonFinite, skipped_step_advances_neither_adams_step_count_nor_the_schedule) {
  for (const EngineKind engine : {EngineKind::Reference, EngineKind::Zero3}) {
    TrainConfig config = small_config(engine);
    config.nonfinite = NonFinitePolicy::Skip;
    config.lr_schedule = {.kind = LrScheduleKind::Linear, .total_steps = 2};  // lr, then lr / 2
    config.steps = 2;
    const BatchFn normal = poisoned_batches(config, -1, 0, 0.0f);
    const EngineRun skipped_first = run_engine(config, [&](std::int64_t step, int rank) {
      Batch batch = normal(1, rank);
      if (step == 0) batch.x[3] = std::numeric_limits<float>::quiet_NaN();
      return batch;
    });
    ASSERT_EQ(skipped_first.stats.size(), 2u);
    EXPECT_TRUE(skipped_first.stats[0].skipped);
    config.steps = 1;
    const EngineRun one_step =
        run_engine(config, [&](std::int64_t, int rank) { return normal(1, rank); });
    EXPECT_FALSE(state_difference(skipped_first.state, one_step.state)) << engine_name(engine);
  }
}

// For any shape, world, step and rank of the bad value: with Skip every stage is bitwise the
// reference, and exactly that step is skipped.
RC_GTEST_PROP(NonFinite, prop_skipped_steps_keep_every_stage_bitwise_the_reference, ()) {
  TrainConfig config = small_config(EngineKind::Reference);
  config.world = *rc::gen::inRange(1, 6);
  config.steps = *rc::gen::inRange(1, 5);
  config.mlp = {.layers = *rc::gen::inRange(1, 4),
                .width = *rc::gen::inRange(1, 20),
                .in = *rc::gen::inRange(1, 8),
                .classes = *rc::gen::inRange(2, 6)};
  config.nonfinite = NonFinitePolicy::Skip;
  config.lr_schedule = *rc::gen_lr_schedule();
  const auto bad_step = *rc::gen::inRange<std::int64_t>(0, config.steps);
  const int bad_rank = *rc::gen::inRange(0, config.world);
  const float value = *rc::gen::element(std::numeric_limits<float>::quiet_NaN(),
                                        std::numeric_limits<float>::infinity(),
                                        -std::numeric_limits<float>::infinity());
  const BatchFn batch = poisoned_batches(config, bad_step, bad_rank, value);
  const EngineRun reference = run_engine(config, batch);
  RC_ASSERT(reference.stats.size() == static_cast<std::size_t>(config.steps));
  for (std::int64_t s = 0; s < config.steps; ++s) {
    RC_ASSERT(reference.stats[static_cast<std::size_t>(s)].skipped == (s == bad_step));
  }
  for (const EngineKind engine : kStages) {
    config.engine = engine;
    const EngineRun run = run_engine(config, batch);
    if (const auto diff = state_difference(run.state, reference.state)) {
      RC_FAIL(fmt::format("{}: {}", engine_name(engine), *diff));
    }
    for (std::size_t s = 0; s < run.stats.size(); ++s) {
      RC_ASSERT(run.stats[s].skipped == reference.stats[s].skipped);
      RC_ASSERT(std::bit_cast<std::uint64_t>(run.stats[s].grad_norm) ==
                std::bit_cast<std::uint64_t>(reference.stats[s].grad_norm));
    }
  }
}

}  // namespace
}  // namespace zl
