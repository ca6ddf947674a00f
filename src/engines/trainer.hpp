// trainer.hpp — runs a whole training job: builds the world (the simulator's threads, or one
// process for the reference), a device, the model and an engine per rank, steps it, averages the
// logged loss across ranks, and collects the final state and each rank's ledgers.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <vector>

#include "comm/traffic_ledger.hpp"
#include "core/memory_ledger.hpp"
#include "engines/engine.hpp"
#include "engines/partition.hpp"
#include "model/mlp.hpp"

namespace zl {

/// Everything that defines a run. Two runs with equal configs produce identical bits.
struct TrainConfig {
  MlpConfig mlp;
  EngineKind engine = EngineKind::Ddp;
  int world = 1;
  std::int64_t steps = 10;
  std::int64_t micro_batch = 32;  ///< rows per rank per step (train_micro_batch_size_per_gpu)
  AdamWConfig adamw;
  std::uint64_t seed = 0;    ///< parameter init and data
  bool record_data = false;  ///< keep every sample the engines were given (for --save-data)
  std::chrono::milliseconds collective_timeout{std::chrono::seconds(120)};
};

/// Throws zl::Error with a one-line message naming the bad setting and what to use instead.
void validate(const TrainConfig& config);

/// What one step reports, as the command prints it.
struct StepRecord {
  std::int64_t step = 0;  ///< 0-based
  float loss = 0.0f;      ///< mean over the W micro-batches
  double grad_norm = 0.0;
  double step_ms = 0.0;  ///< wall time of engine.step() on rank 0
};

/// One rank's measured ledgers at the end of the run.
struct RankReport {
  int rank = 0;
  MemoryLedger memory;
  TrafficLedger traffic;
};

/// The samples a run used: x [steps*W*B, features] and y [steps*W*B], step-major, then rank,
/// then row (step t, rank r uses rows (t*W + r)*B ... + B-1).
struct UsedData {
  std::vector<float> x;
  std::vector<std::int64_t> y;
};

/// Everything a run produced.
struct TrainResult {
  std::vector<UnitLayout> layout;  ///< units laid out for the run's world
  std::vector<StepRecord> steps;
  ModelState final_state;
  std::vector<RankReport> ranks;  ///< one per rank (one in total for the reference)
  UsedData data;                  ///< filled when config.record_data
};

/// Called on rank 0 after each step.
using StepCallback = std::function<void(const StepRecord&)>;

/// Called on rank `rank`'s thread at each engine event (see EngineObserver).
using RankObserver = std::function<void(int rank, const EngineEvent&, const MemoryLedger&)>;

/// Runs `config` to the end. Throws zl::Error on bad config or a failed rank. The ledgers in the
/// result are read right after the last step (before the final state is assembled).
TrainResult train(const TrainConfig& config, const StepCallback& on_step = {},
                  const RankObserver& observer = {});

/// The parameters every engine starts from: unpadded, one vector per unit.
std::vector<std::vector<float>> initial_params(const TrainConfig& config);

}  // namespace zl
