// lr_schedule.cpp — the schedules' formulas, each in the order of operations of its original
// (transformers' optimization.py for the flags' schedules, DeepSpeed's lr_schedules.py for the
// `scheduler` section), so the values agree to the bit with those Python implementations.
#include "optim/lr_schedule.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numbers>

#include "core/error.hpp"

namespace zl {
namespace {

// ---- transformers' LambdaLR factors; s = updates applied before ----

double hf_warmup(std::int64_t s, std::int64_t warmup) {
  return static_cast<double>(s) / static_cast<double>(std::max<std::int64_t>(1, warmup));
}

// The decay's fraction of the way from the peak (1) to the floor (min_lr_rate), as
// get_cosine_with_min_lr_schedule_with_warmup applies it: factor * (1 - rate) + rate. With
// min_lr 0 this is the plain schedule's factor, bit for bit.
double hf_floor(double factor, double min_lr_rate) {
  return std::max(0.0, factor * (1 - min_lr_rate) + min_lr_rate);
}

double hf_factor(const LrSchedule& schedule, double min_lr_rate, std::int64_t s) {
  const std::int64_t warmup = schedule.warmup_steps;
  if (s < warmup) return hf_warmup(s, warmup);
  const std::int64_t total = schedule.total_steps;
  switch (schedule.kind) {
    case LrScheduleKind::Linear: {
      const double left = std::max(0.0, static_cast<double>(total - s) /
                                            static_cast<double>(std::max<std::int64_t>(1, total - warmup)));
      return hf_floor(left, min_lr_rate);
    }
    case LrScheduleKind::Cosine: {
      // Past the end the progress stays at 1 (transformers' cosine would rise again).
      const double progress = std::min(
          1.0, static_cast<double>(s - warmup) /
                   static_cast<double>(std::max<std::int64_t>(1, total - warmup)));
      const double factor = 0.5 * (1.0 + std::cos(std::numbers::pi * 0.5 * 2.0 * progress));
      return hf_floor(factor, min_lr_rate);
    }
    default:
      return 1.0;
  }
}

// ---- DeepSpeed; it = last_batch_iteration = s - 1 ----

// WarmupLR's and WarmupCosineLR's rise, 0 at it = 0, for it < max(2, warmup_num_steps).
double ds_rise(const LrSchedule& schedule, std::int64_t it) {
  const std::int64_t warmup = std::max<std::int64_t>(2, schedule.warmup_steps);
  if (schedule.warmup_shape == WarmupShape::Log) {
    const double inverse_log_warm_up = 1.0 / std::log(static_cast<double>(warmup));
    return inverse_log_warm_up * std::log(static_cast<double>(it + 1));
  }
  return static_cast<double>(it) / static_cast<double>(warmup);
}

double ds_warmup_lr(const LrSchedule& schedule, double max_lr, std::int64_t it) {
  if (it < 0) return schedule.min_lr;
  const std::int64_t warmup = std::max<std::int64_t>(2, schedule.warmup_steps);
  double gamma = 1.0;
  if (it < warmup) {
    gamma = ds_rise(schedule, it);
  } else if (schedule.kind == LrScheduleKind::WarmupDecayLR) {
    gamma = std::max(0.0, static_cast<double>(schedule.total_steps - it) /
                              std::max(1.0, static_cast<double>(schedule.total_steps - warmup)));
  }
  return schedule.min_lr + ((max_lr - schedule.min_lr) * gamma);
}

double ds_cosine_lr(const LrSchedule& schedule, double org_lr, std::int64_t it) {
  if (it < 0) return 0.0;
  const std::int64_t warmup = std::max<std::int64_t>(2, schedule.warmup_steps);
  double ratio = 0.0;
  if (it < warmup) {
    const double rise = ds_rise(schedule, it);
    ratio = schedule.warmup_min_ratio + rise * (1. - schedule.warmup_min_ratio);
  } else {
    const double real_last_step = static_cast<double>(it - warmup + 1);
    const double real_total_steps =
        static_cast<double>(std::max<std::int64_t>(1, schedule.total_steps - warmup));
    const double progress = std::min(1.0, real_last_step / real_total_steps);
    const double cosine = (1 + std::cos(std::numbers::pi * progress)) / 2;
    ratio = std::max(0.0, schedule.cos_min_ratio + (1. - schedule.cos_min_ratio) * cosine);
  }
  return org_lr * ratio;
}

// OneCycle's position in the cycle, 0 at the bottom and 1 at the top (_get_scale_factor).
double one_cycle_scale(const OneCycleParams& p, std::int64_t it) {
  const double first = p.first_step_size;
  const double second = p.second_step_size < 0 ? first : p.second_step_size;
  const double total = first + second;
  const double step_ratio = first / total;
  const double batch_iteration = static_cast<double>(it + 1);
  const double cycle = std::floor(1 + batch_iteration / total);
  const double x = 1. + batch_iteration / total - cycle;
  double scale = 0.0;
  std::int64_t stairs = 0;
  if (x <= step_ratio) {
    scale = x / step_ratio;
    stairs = p.first_stair_count;
  } else {
    scale = (x - 1) / (step_ratio - 1);
    stairs = p.second_stair_count < 0 ? p.first_stair_count : p.second_stair_count;
  }
  if (stairs > 0) {
    const double in_cycle = std::fmod(batch_iteration, total);
    const double position = in_cycle <= first
                                ? in_cycle * static_cast<double>(stairs) / first
                                : (total - in_cycle) * static_cast<double>(stairs) / second;
    scale = std::floor(position) / static_cast<double>(stairs);
  }
  return scale;
}

AdamWConfig one_cycle(const AdamWConfig& base, const LrSchedule& schedule, std::int64_t it) {
  const OneCycleParams& p = schedule.one_cycle;
  AdamWConfig out = base;
  if (p.cycle_momentum) out.beta2 = 0.99;  // DeepSpeed pairs every cycled beta1 with 0.99
  if (it < 0) {  // the values the scheduler sets when it is built
    out.lr = schedule.min_lr;
    if (p.cycle_momentum) out.beta1 = p.min_mom;
    return out;
  }
  const double first = p.first_step_size;
  const double total = first + (p.second_step_size < 0 ? first : p.second_step_size);
  if (static_cast<double>(it) < total) {
    const double scale = one_cycle_scale(p, it);
    out.lr = schedule.min_lr + (base.lr - schedule.min_lr) * scale;
    if (p.cycle_momentum) out.beta1 = p.max_mom - (p.max_mom - p.min_mom) * scale;
    return out;
  }
  const double decay_iteration = static_cast<double>(it) - total + 1;
  const bool no_decay_steps = p.decay_step_size == 0.0;
  out.lr = schedule.min_lr;
  if (!no_decay_steps && p.decay_lr_rate != 0.0) {
    out.lr = schedule.min_lr / (1 + p.decay_lr_rate * (decay_iteration / p.decay_step_size));
  }
  if (p.cycle_momentum) {
    out.beta1 = p.max_mom;
    if (!no_decay_steps && p.decay_mom_rate != 0.0) {
      out.beta1 = p.max_mom * (1 + p.decay_mom_rate * (decay_iteration / p.decay_step_size));
    }
  }
  return out;
}

void check_finite_at_least(double value, double low, std::string_view name) {
  ZL_CHECK(std::isfinite(value) && value >= low, "{} {} is invalid: it must be a finite number >= {}",
           name, value, low);
}

}  // namespace

std::string_view lr_schedule_name(LrScheduleKind kind) {
  switch (kind) {
    case LrScheduleKind::Constant: return "constant";
    case LrScheduleKind::Linear: return "linear";
    case LrScheduleKind::Cosine: return "cosine";
    case LrScheduleKind::WarmupLR: return "WarmupLR";
    case LrScheduleKind::WarmupDecayLR: return "WarmupDecayLR";
    case LrScheduleKind::WarmupCosineLR: return "WarmupCosineLR";
    case LrScheduleKind::OneCycle: return "OneCycle";
  }
  return "?";
}

bool lr_schedule_decays(LrScheduleKind kind) {
  return kind == LrScheduleKind::Linear || kind == LrScheduleKind::Cosine ||
         kind == LrScheduleKind::WarmupDecayLR || kind == LrScheduleKind::WarmupCosineLR;
}

std::string lr_schedule_summary(const LrSchedule& s) {
  const std::string name{lr_schedule_name(s.kind)};
  switch (s.kind) {
    case LrScheduleKind::Constant:
      return s.warmup_steps == 0 ? name : fmt::format("{}: warmup {}", name, s.warmup_steps);
    case LrScheduleKind::Linear:
    case LrScheduleKind::Cosine:
      return fmt::format("{}: warmup {}, decay to {} at {}", name, s.warmup_steps, s.min_lr,
                         s.total_steps);
    case LrScheduleKind::WarmupLR:
    case LrScheduleKind::WarmupDecayLR:
      return fmt::format("{}: from {} over {} ({}){}", name, s.min_lr, s.warmup_steps,
                         s.warmup_shape == WarmupShape::Log ? "log" : "linear",
                         s.kind == LrScheduleKind::WarmupDecayLR
                             ? fmt::format(", decay to 0 at {}", s.total_steps)
                             : "");
    case LrScheduleKind::WarmupCosineLR:
      return fmt::format("{}: ratio {} over {} ({}), cosine to {} at {}", name, s.warmup_min_ratio,
                         s.warmup_steps, s.warmup_shape == WarmupShape::Log ? "log" : "linear",
                         s.cos_min_ratio, s.total_steps);
    case LrScheduleKind::OneCycle:
      return fmt::format("{}: from {} over {} updates{}", name, s.min_lr,
                         s.one_cycle.first_step_size,
                         s.one_cycle.cycle_momentum ? ", cycling beta1" : "");
  }
  return name;
}

void validate(const LrSchedule& s) {
  ZL_CHECK(s.warmup_steps >= 0, "warmup steps {} is invalid: it must be >= 0", s.warmup_steps);
  ZL_CHECK(s.total_steps >= 0, "decay steps {} is invalid: it must be >= 0", s.total_steps);
  check_finite_at_least(s.min_lr, 0.0, "min lr");
  if (s.kind == LrScheduleKind::WarmupCosineLR) {
    ZL_CHECK(s.warmup_steps > 0,
             "scheduler.params.warmup_num_steps {} is invalid: WarmupCosineLR needs at least 1",
             s.warmup_steps);
    check_finite_at_least(s.warmup_min_ratio, 0.0, "scheduler.params.warmup_min_ratio");
    check_finite_at_least(s.cos_min_ratio, 0.0, "scheduler.params.cos_min_ratio");
  }
  if (s.kind == LrScheduleKind::OneCycle) {
    const OneCycleParams& p = s.one_cycle;
    ZL_CHECK(std::isfinite(p.first_step_size) && p.first_step_size > 0,
             "scheduler.params.cycle_first_step_size {} is invalid: it must be > 0",
             p.first_step_size);
    ZL_CHECK(std::isfinite(p.second_step_size),
             "scheduler.params.cycle_second_step_size {} is invalid", p.second_step_size);
    check_finite_at_least(p.decay_step_size, 0.0, "scheduler.params.decay_step_size");
    ZL_CHECK(std::isfinite(p.decay_lr_rate) && std::isfinite(p.decay_mom_rate),
             "scheduler.params.decay_lr_rate and decay_mom_rate must be finite numbers");
    for (const double mom : {p.min_mom, p.max_mom}) {
      ZL_CHECK(std::isfinite(mom) && mom >= 0.0 && mom < 1.0,
               "scheduler.params.cycle_min_mom/cycle_max_mom {} is invalid: Adam's beta1 must be "
               "in [0, 1)",
               mom);
    }
  }
}

AdamWConfig scheduled_adamw(const AdamWConfig& base, const LrSchedule& schedule,
                            std::int64_t applied) {
  ZL_CHECK(applied >= 0, "{} applied updates is invalid", applied);
  AdamWConfig out = base;
  switch (schedule.kind) {
    case LrScheduleKind::Constant:
    case LrScheduleKind::Linear:
    case LrScheduleKind::Cosine:
      out.lr = base.lr * hf_factor(schedule, schedule.min_lr / base.lr, applied);
      return out;
    case LrScheduleKind::WarmupLR:
    case LrScheduleKind::WarmupDecayLR:
      out.lr = ds_warmup_lr(schedule, base.lr, applied - 1);
      return out;
    case LrScheduleKind::WarmupCosineLR:
      out.lr = ds_cosine_lr(schedule, base.lr, applied - 1);
      return out;
    case LrScheduleKind::OneCycle:
      return one_cycle(base, schedule, applied - 1);
  }
  return out;
}

}  // namespace zl
