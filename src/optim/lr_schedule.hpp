// lr_schedule.hpp — the learning rate of every AdamW update (and, for DeepSpeed's OneCycle, Adam's
// betas): a pure function of the schedule, the base hyperparameters and the number of updates
// applied before, so every rank, every stage and a resumed run compute the same bits.
//
// Updates count as DeepSpeed and Hugging Face's Trainer count scheduler steps: the scheduler
// advances once per applied update, never for a step that was skipped (an fp16 overflow, or
// --skip-nonfinite). Two families, each written op for op as its original computes it in double:
//   - the flags' schedules, as transformers' get_{constant,linear,cosine}_schedule_with_warmup
//     (LambdaLR: lr = base_lr * factor(s), s = updates applied before this one);
//   - DeepSpeed's `scheduler` section: WarmupLR, WarmupDecayLR, WarmupCosineLR and OneCycle, as
//     deepspeed/runtime/lr_schedules.py computes them (last_batch_iteration = s - 1, so the first
//     update runs at the value the scheduler set when it was built).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "optim/adamw.hpp"

namespace zl {

/// Which schedule (`--lr-schedule`, or DeepSpeed's `scheduler.type`).
enum class LrScheduleKind : std::uint8_t {
  Constant,        ///< the base lr, after an optional linear warmup from 0 (the default: no warmup)
  Linear,          ///< linear warmup from 0, then linear decay to min_lr at total_steps
  Cosine,          ///< linear warmup from 0, then half a cosine down to min_lr at total_steps
  WarmupLR,        ///< DeepSpeed: min_lr to the base lr over warmup_steps (log or linear), then flat
  WarmupDecayLR,   ///< DeepSpeed: WarmupLR, then linear decay to 0 at total_steps
  WarmupCosineLR,  ///< DeepSpeed: ratios of the base lr, warmup then cosine to cos_min_ratio
  OneCycle,        ///< DeepSpeed: min_lr up to the base lr and back, then decay; cycles beta1
};

/// How DeepSpeed's warmups rise (`warmup_type`).
enum class WarmupShape : std::uint8_t {
  Log,     ///< gamma = ln(i + 1) / ln(warmup_steps), DeepSpeed's default
  Linear,  ///< gamma = i / warmup_steps
};

/// DeepSpeed's OneCycle parameters (scheduler.params), with its defaults. The cycle runs from
/// LrSchedule::min_lr up to the base lr (cycle_max_lr) and back.
struct OneCycleParams {
  double first_step_size = 2000.0;  ///< cycle_first_step_size: updates rising
  double second_step_size = -1.0;   ///< cycle_second_step_size: updates falling; < 0: the first's
  std::int64_t first_stair_count = 0;    ///< cycle_first_stair_count: 0 rises smoothly
  std::int64_t second_stair_count = -1;  ///< cycle_second_stair_count; < 0: the first's
  double decay_step_size = 0.0;  ///< decay_step_size: 0 keeps the end values after the cycle
  double decay_lr_rate = 0.0;    ///< decay_lr_rate: lr = min_lr / (1 + rate * intervals)
  bool cycle_momentum = true;    ///< cycle_momentum: beta1 falls as lr rises (beta2 is 0.99)
  double min_mom = 0.8;          ///< cycle_min_mom
  double max_mom = 0.9;          ///< cycle_max_mom
  double decay_mom_rate = 0.0;   ///< decay_mom_rate: beta1 = max_mom * (1 + rate * intervals)

  /// Same parameters.
  bool operator==(const OneCycleParams&) const = default;
};

/// A learning-rate schedule. The peak is always the AdamW config's lr (DeepSpeed's warmup_max_lr
/// and cycle_max_lr are read into it).
struct LrSchedule {
  LrScheduleKind kind = LrScheduleKind::Constant;  ///< which formula
  std::int64_t warmup_steps = 0;  ///< updates of warmup (--warmup-steps, warmup_num_steps)
  /// Where the decay ends (--decay-steps, total_num_steps); 0 means the run's --steps, filled in
  /// before training.
  std::int64_t total_steps = 0;
  double min_lr = 0.0;  ///< the floor (--min-lr), DeepSpeed's warmup_min_lr or cycle_min_lr
  WarmupShape warmup_shape = WarmupShape::Log;  ///< DeepSpeed's warmup_type
  double warmup_min_ratio = 0.0;  ///< WarmupCosineLR: the warmup's start as a fraction of lr
  double cos_min_ratio = 1e-4;    ///< WarmupCosineLR: the end as a fraction of lr
  OneCycleParams one_cycle{};     ///< OneCycle's parameters

  /// Same schedule.
  bool operator==(const LrSchedule&) const = default;
};

/// "constant", "linear", "cosine", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR", "OneCycle".
std::string_view lr_schedule_name(LrScheduleKind kind);

/// Whether the schedule decays towards an end (linear, cosine, WarmupDecayLR, WarmupCosineLR):
/// its total_steps, when 0, is the run's --steps.
bool lr_schedule_decays(LrScheduleKind kind);

/// The schedule in words for messages and the run's header, e.g. "cosine: warmup 100, decay to
/// 3e-05 at 5000"; "constant" for the default.
std::string lr_schedule_summary(const LrSchedule& schedule);

/// Throws zl::Error with a one-line message naming the bad field and its range.
void validate(const LrSchedule& schedule);

/// The hyperparameters of the AdamW update that follows `applied` applied updates: `base` with
/// its lr (and, for OneCycle with cycle_momentum, its betas) as the schedule gives them.
AdamWConfig scheduled_adamw(const AdamWConfig& base, const LrSchedule& schedule,
                            std::int64_t applied);

}  // namespace zl
