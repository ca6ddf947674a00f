// lesson_values.hpp — the numbers behind the ledgers: what each rank holds of a unit at the last
// step of a run (parameters, its own micro-batch gradient, the averaged gradient, Adam's m and v,
// and under mixed precision the fp32 master), recomputed with the engines' own pieces
// (run_micro_batch, reduce_rank_order) and checked against the run, and printed as element ranges
// with their first and last values.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "engines/partition.hpp"
#include "run/train.hpp"

namespace zl::lessons {

/// One unit's values at the last step, every buffer padded to the unit's padded size. Values in
/// the training dtype (params, grads) are held widened to float, which is exact.
struct UnitValues {
  std::vector<float> params_before;             ///< the parameters the last step computed with
  std::vector<std::vector<float>> local_grads;  ///< per rank: its own micro-batch's gradient
  std::vector<float> averaged;                  ///< the rank-order average of local_grads
  std::vector<float> params_after;              ///< after the last step's update
  std::vector<float> exp_avg;                   ///< Adam's m after the last step
  std::vector<float> exp_avg_sq;                ///< Adam's v after the last step
  /// Mixed precision: the fp32 master before and after the update, which AdamW updates and the
  /// 16-bit parameters are rounded from. Empty in fp32, where the parameters are the master.
  std::vector<float> master_before;
  std::vector<float> master_after;  ///< see master_before
};

/// The values of every unit at the last step of `result`, the run of `config`.
struct StepValues {
  std::vector<UnitLayout> layout;  ///< as the run laid the units out
  std::vector<UnitValues> units;   ///< one per unit, in layout order
  /// The canonical norm (optim/grad_norm.hpp) of the averaged gradients: equal to the run's last
  /// step's grad_norm when the values are the ones the engines computed.
  double grad_norm = 0.0;
};

/// Recomputes the last step of `result`: the parameters it started from (a run of steps - 1, or
/// the init), each rank's micro-batch gradient (run_micro_batch on the rank's batch, as every
/// engine runs it) and their average (reduce_rank_order, as every collective averages); the
/// moments and updated parameters are the result's. fp32, or bf16/fp16 with an fp32 master, without
/// accumulation (the lessons' engines); throws zl::Error otherwise.
StepValues step_values(const TrainConfig& config, const TrainResult& result);

/// True when the averaged gradients' norm equals the run's last grad_norm bit for bit; prints
/// the check as an "ok:" line (or "MISMATCH:").
bool check_values(const StepValues& values, const TrainResult& result);

/// "[320, 640)  +0.0483 -0.00567 +1.2e-05 … +0.0031": the range and its values (3 significant
/// digits), the first three and the last when there are more than five.
std::string slice_text(std::span<const float> values, ShardRange range);

/// One line per rank: `what` of rank r's own shard of `unit` (its range and values).
void print_shards(std::string_view what, const std::vector<float>& values, const UnitLayout& unit,
                  int world);

/// Every rank's gradient of `unit` from its own rows, before any reduction (they differ).
void print_local_grads(const UnitValues& values, const UnitLayout& unit, int world);

/// AdamW on the own shards of `unit`: every rank's parameter shard before and after the update
/// (under mixed precision: its fp32 master before and after, and the 16-bit parameters rounded
/// from it), and its m and v shards.
void print_update(const UnitValues& values, const UnitLayout& unit, int world);

/// The reduce-scatter of `unit`'s gradient: for each rank's shard, every rank's input slice and
/// the average that rank receives.
void print_reduce_scatter(const UnitValues& values, const UnitLayout& unit, int world);

}  // namespace zl::lessons
