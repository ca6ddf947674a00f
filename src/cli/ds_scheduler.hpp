// ds_scheduler.hpp — DeepSpeed's `scheduler` section ({"type": ..., "params": {...}}) read into an
// LrSchedule: WarmupLR, WarmupDecayLR, WarmupCosineLR and OneCycle, each with DeepSpeed's defaults
// for the params it leaves out, and Hugging Face's "auto" where transformers fills it in.
#pragma once

#include <optional>
#include <string>

#include "cli/ds_json.hpp"
#include "optim/lr_schedule.hpp"

namespace zl::ds {

/// What the section sets: the schedule, and the peak lr when the section names one
/// (warmup_max_lr, cycle_max_lr), which replaces the optimizer's lr as it does in DeepSpeed.
struct DsScheduler {
  LrSchedule schedule;             ///< total_steps 0 when "auto": the run's --steps
  std::optional<double> peak_lr;   ///< warmup_max_lr or cycle_max_lr, unless "auto" or absent
};

/// Reads the `scheduler` object at `path`. A param that is "auto" (transformers' convention)
/// keeps the run's value: warmup_max_lr the optimizer's lr (or --lr), warmup_min_lr 0,
/// warmup_num_steps 0 (or --warmup-steps), total_num_steps 0 (the run's --steps). Throws zl::Error
/// for another type (LRRangeTest and torch.optim.lr_scheduler names included) or a missing
/// required param; a bad value is a problem kept by the checker.
DsScheduler read_scheduler(const Checker& check, const json& value, const std::string& path);

}  // namespace zl::ds
