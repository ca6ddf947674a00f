// trainer.cpp — one training job on the sim backend or in the reference process.
#include "engines/trainer.hpp"

#include <mutex>

#include "model/data.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "sim_world.hpp"

namespace zl {

void validate(const TrainConfig& config) {
  validate(config.mlp);
  ZL_CHECK(config.world >= 1, "--world {} is invalid: use 1 or more ranks", config.world);
  ZL_CHECK(config.steps >= 1, "--steps {} is invalid: train at least 1 step", config.steps);
  ZL_CHECK(config.micro_batch >= 1, "--micro-batch {} is invalid: use 1 or more rows per rank",
           config.micro_batch);
  ZL_CHECK(config.adamw.lr > 0.0, "--lr {} is invalid: the learning rate must be > 0",
           config.adamw.lr);
  ZL_CHECK(config.adamw.weight_decay >= 0.0, "--weight-decay {} is invalid: use 0 or more",
           config.adamw.weight_decay);
}

namespace {

ClassificationTask task_of(const TrainConfig& config) {
  return {.features = config.mlp.in, .classes = config.mlp.classes, .seed = config.seed};
}

// The data source engines see; with record_data it also copies each batch into `used`.
BatchFn batch_source(const TrainConfig& config, UsedData* used) {
  const ClassificationTask task = task_of(config);
  return [task, config, used](std::int64_t step, int rank) {
    const std::int64_t first = first_sample_of(step, rank, config.world, config.micro_batch);
    Batch batch = task.batch(first, config.micro_batch);
    if (used != nullptr) {  // rows of different ranks are disjoint, so threads never overlap
      std::copy(batch.x.begin(), batch.x.end(), used->x.begin() + first * task.features);
      std::copy(batch.y.begin(), batch.y.end(), used->y.begin() + first);
    }
    return batch;
  };
}

double ms_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
      .count();
}

}  // namespace

std::vector<std::vector<float>> initial_params(const TrainConfig& config) {
  CpuDevice device;
  const Mlp model(device, config.mlp);
  std::vector<std::vector<float>> params;
  for (std::size_t u = 0; u < model.units().size(); ++u) {
    params.emplace_back(static_cast<std::size_t>(model.units()[u].numel()));
    model.init_unit(static_cast<int>(u), params.back(), config.seed);
  }
  return params;
}

TrainResult train(const TrainConfig& config, const StepCallback& on_step,
                  const RankObserver& observer) {
  validate(config);
  TrainResult result;
  if (config.record_data) {
    const std::int64_t rows = config.steps * config.world * config.micro_batch;
    result.data.x.resize(static_cast<std::size_t>(rows * config.mlp.in));
    result.data.y.resize(static_cast<std::size_t>(rows));
  }
  const EngineOptions options{
      .adamw = config.adamw,
      .seed = config.seed,
      .batch = batch_source(config, config.record_data ? &result.data : nullptr),
      .observer = {}};
  // Each rank's engine reports its events with its rank number.
  auto options_of_rank = [&](int rank) {
    EngineOptions own = options;
    if (observer) {
      own.observer = [&observer, rank](const EngineEvent& event, const MemoryLedger& ledger) {
        observer(rank, event, ledger);
      };
    }
    return own;
  };

  // Runs the step loop for one engine; `mean_loss` turns the engine's loss into the logged one.
  auto run_steps = [&](Engine& engine, bool is_rank0,
                       const std::function<float(float)>& mean_loss) {
    for (std::int64_t step = 0; step < config.steps; ++step) {
      const auto start = std::chrono::steady_clock::now();
      const StepStats stats = engine.step(step);
      const double step_ms = ms_since(start);
      const StepRecord record{step, mean_loss(stats.loss), stats.grad_norm, step_ms};
      if (!is_rank0) continue;
      result.steps.push_back(record);
      if (on_step) on_step(record);
    }
  };

  if (config.engine == EngineKind::Reference) {
    CpuDevice device;
    Mlp model(device, config.mlp);
    result.layout = layout_units(model.units(), config.world);
    auto engine = make_reference_engine(model, device, config.world, options_of_rank(0));
    run_steps(*engine, true, [](float loss) { return loss; });
    result.ranks.push_back({0, device.ledger(), TrafficLedger{}});
    result.final_state = engine->full_state();
    return result;
  }

  SimWorld world(config.world, SimOptions{.timeout = config.collective_timeout});
  result.ranks.resize(static_cast<std::size_t>(config.world));
  world.run([&](Comm& comm) {
    CpuDevice device;
    Mlp model(device, config.mlp);
    auto engine = make_engine(config.engine, model, device, comm, options_of_rank(comm.rank()));
    const bool is_rank0 = comm.rank() == 0;
    run_steps(*engine, is_rank0, [&comm](float loss) {
      comm.all_reduce(&loss, 1, DType::F32, ReduceOp::Avg);  // the logged loss, as nanoGPT does
      return loss;
    });
    result.ranks[comm.rank()] = {comm.rank(), device.ledger(), comm.traffic()};
    ModelState state = engine->full_state();
    if (is_rank0) {
      result.layout = layout_units(model.units(), config.world);
      result.final_state = std::move(state);
    }
  });
  return result;
}

}  // namespace zl
