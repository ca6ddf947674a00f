// ds_scheduler.cpp — the `scheduler` section: one table of params per DeepSpeed scheduler, the
// values checked as DeepSpeed's constructors take them (deepspeed/runtime/lr_schedules.py).
#include "cli/ds_scheduler.hpp"

#include <fmt/format.h>

#include <limits>

namespace zl::ds {
namespace {

constexpr std::int64_t kMaxSteps = std::int64_t{1} << 53;  // exact as a double, like DeepSpeed's

bool non_negative(double x) {
  return x >= 0.0;
}
bool positive(double x) {
  return x > 0.0;
}
bool any(double) {
  return true;
}
bool momentum_range(double x) {
  return x >= 0.0 && x < 1.0;
}

// The readers of one scheduler's params, filling `out`; `seen` collects the keys given.
class ParamsReader {
 public:
  ParamsReader(const Checker& check, DsScheduler& out) : check_(check), out_(out) {}

  Readers warmup(bool decays) {
    LrSchedule& s = out_.schedule;
    Readers readers = {
        {"warmup_min_lr", [this, &s](const json& v, const std::string& p) {
           s.min_lr = check_.real(v, p, non_negative, "use an lr >= 0");
         }},
        {"warmup_max_lr", [this](const json& v, const std::string& p) {
           out_.peak_lr = check_.real(v, p, positive, "use an lr > 0");
         }},
        {"warmup_num_steps", steps_reader(s.warmup_steps)},
        {"warmup_type", shape_reader()},
    };
    if (decays) readers.emplace("total_num_steps", total_reader());
    return readers;
  }

  Readers cosine() {
    LrSchedule& s = out_.schedule;
    return {
        {"total_num_steps", total_reader()},
        {"warmup_num_steps", steps_reader(s.warmup_steps)},
        {"warmup_type", shape_reader()},
        {"warmup_min_ratio", ratio_reader(s.warmup_min_ratio)},
        {"cos_min_ratio", ratio_reader(s.cos_min_ratio)},
    };
  }

  Readers one_cycle() {
    LrSchedule& s = out_.schedule;
    OneCycleParams& c = s.one_cycle;
    return {
        {"cycle_min_lr", [this, &s](const json& v, const std::string& p) {
           s.min_lr = check_.real(v, p, non_negative, "use an lr >= 0");
           given_min_ = true;
         }},
        {"cycle_max_lr", [this](const json& v, const std::string& p) {
           out_.peak_lr = check_.real(v, p, positive, "use an lr > 0");
         }},
        {"decay_lr_rate", number_reader(c.decay_lr_rate, any, "use a number")},
        {"cycle_first_step_size", number_reader(c.first_step_size, positive, "use a size > 0")},
        {"cycle_second_step_size", number_reader(c.second_step_size, non_negative,
                                                 "use a size >= 0 (or leave it out: the first's)")},
        {"cycle_first_stair_count", count_reader(c.first_stair_count)},
        {"cycle_second_stair_count", count_reader(c.second_stair_count)},
        {"decay_step_size", number_reader(c.decay_step_size, non_negative, "use a size >= 0")},
        {"cycle_momentum", [this, &c](const json& v, const std::string& p) {
           c.cycle_momentum = check_.boolean(v, p);
         }},
        {"cycle_min_mom", number_reader(c.min_mom, momentum_range, "use a beta1 in [0, 1)")},
        {"cycle_max_mom", number_reader(c.max_mom, momentum_range, "use a beta1 in [0, 1)")},
        {"decay_mom_rate", number_reader(c.decay_mom_rate, any, "use a number")},
    };
  }

  bool given_min() const { return given_min_; }

 private:
  Reader steps_reader(std::int64_t& field) {
    return [this, &field](const json& v, const std::string& p) {
      field = check_.whole(v, p, 0, kMaxSteps, "use 0 or more updates");
    };
  }

  Reader total_reader() {
    return [this](const json& v, const std::string& p) {
      out_.schedule.total_steps = check_.whole(v, p, 1, kMaxSteps, "use 1 or more updates");
    };
  }

  Reader shape_reader() {
    return [this](const json& v, const std::string& p) {
      const std::string name = v.is_string() ? v.get<std::string>() : std::string();
      if (name != "log" && name != "linear") check_.bad(p, v, "use \"log\" or \"linear\"");
      out_.schedule.warmup_shape = name == "log" ? WarmupShape::Log : WarmupShape::Linear;
    };
  }

  Reader ratio_reader(double& field) {
    return number_reader(field, non_negative, "use a ratio >= 0");
  }

  Reader number_reader(double& field, bool (*accepts)(double), std::string_view use) {
    return [this, &field, accepts, use](const json& v, const std::string& p) {
      field = check_.real(v, p, accepts, use);
    };
  }

  Reader count_reader(std::int64_t& field) {
    return [this, &field](const json& v, const std::string& p) {
      if (v.is_null()) return;  // DeepSpeed's None: the default
      field = check_.whole(v, p, 0, kMaxSteps, "use 0 or more stairs");
    };
  }

  const Checker& check_;
  DsScheduler& out_;
  bool given_min_ = false;
};

LrScheduleKind kind_of(const Checker& check, const json& v, const std::string& p) {
  const std::string name = v.is_string() ? v.get<std::string>() : std::string();
  for (const LrScheduleKind kind : {LrScheduleKind::WarmupLR, LrScheduleKind::WarmupDecayLR,
                                    LrScheduleKind::WarmupCosineLR, LrScheduleKind::OneCycle}) {
    if (name == lr_schedule_name(kind)) return kind;
  }
  if (name == "LRRangeTest") {
    check.bad(p, v, "DeepSpeed's LR range test is not implemented in zerolab: use WarmupLR, "
                    "WarmupDecayLR, WarmupCosineLR or OneCycle");
  }
  check.bad(p, v, "use WarmupLR, WarmupDecayLR, WarmupCosineLR or OneCycle");
}

}  // namespace

DsScheduler read_scheduler(const Checker& check, const json& value, const std::string& path) {
  if (!value.is_object()) check.bad(path, value, "use an object with type and params");
  const auto type = value.find("type");
  if (type == value.end()) fail("{}: {}.type is missing: use WarmupLR, WarmupDecayLR, "
                                "WarmupCosineLR or OneCycle", check.source(), path);
  DsScheduler out;
  LrSchedule& s = out.schedule;
  s.kind = kind_of(check, *type, path_of(path, "type"));
  s.warmup_steps = 1000;  // DeepSpeed's default warmup_num_steps
  if (s.kind == LrScheduleKind::OneCycle) s.warmup_steps = 0;
  ParamsReader params(check, out);
  const bool decays = s.kind == LrScheduleKind::WarmupDecayLR;
  const Readers readers = s.kind == LrScheduleKind::WarmupCosineLR ? params.cosine()
                          : s.kind == LrScheduleKind::OneCycle    ? params.one_cycle()
                                                                  : params.warmup(decays);
  check.section(value, path,
                {{"type", [](const json&, const std::string&) {}},
                 {"params", [&](const json& v, const std::string& p) {
                    check.section(v, p, readers);
                  }}});
  const bool needs_total =
      s.kind == LrScheduleKind::WarmupDecayLR || s.kind == LrScheduleKind::WarmupCosineLR;
  const auto given = value.find("params");
  if (given != value.end() && given->is_object() && given->contains("warmup_num_steps") &&
      (*given)["warmup_num_steps"] == "auto") {
    s.warmup_steps = 0;  // the run's --warmup-steps, or none
  }
  if (needs_total && (given == value.end() || !given->is_object() ||
                      !given->contains("total_num_steps"))) {
    fail("{}: {}.params.total_num_steps is missing: {} needs the update its decay ends at (or "
         "\"auto\": the run's --steps)",
         check.source(), path, lr_schedule_name(s.kind));
  }
  if (s.kind == LrScheduleKind::OneCycle && (!params.given_min() || !out.peak_lr)) {
    fail("{}: {}.params needs cycle_min_lr and cycle_max_lr: OneCycle has no defaults for them",
         check.source(), path);
  }
  return out;
}

}  // namespace zl::ds
