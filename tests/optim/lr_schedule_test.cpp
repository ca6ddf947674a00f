// lr_schedule_test.cpp — every schedule against its original, bit for bit: the lr (and OneCycle's
// betas) a torch.optim.AdamW held before each update while transformers' or DeepSpeed's scheduler
// stepped after it (tests/fixtures/lr_schedules.json, written by make_lr_schedule_fixture.py).
// Then the edges the answer key does not reach: zerolab's linear floor, the end of a decay, and
// the checks of bad values.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "ckpt/answer_key.hpp"
#include "core/error.hpp"
#include "optim/lr_schedule.hpp"

namespace zl {
namespace {

using Json = nlohmann::json;

LrScheduleKind kind_named(const std::string& name) {
  for (const LrScheduleKind kind :
       {LrScheduleKind::Constant, LrScheduleKind::Linear, LrScheduleKind::Cosine,
        LrScheduleKind::WarmupLR, LrScheduleKind::WarmupDecayLR, LrScheduleKind::WarmupCosineLR,
        LrScheduleKind::OneCycle}) {
    if (lr_schedule_name(kind) == name) return kind;
  }
  ADD_FAILURE() << "unknown schedule " << name;
  return LrScheduleKind::Constant;
}

// The fixture's schedule: LrSchedule's fields, absent ones at their defaults.
LrSchedule schedule_of(const Json& json) {
  LrSchedule s;
  s.kind = kind_named(json.at("kind").get<std::string>());
  s.warmup_steps = json.value("warmup_steps", s.warmup_steps);
  s.total_steps = json.value("total_steps", s.total_steps);
  s.min_lr = json.value("min_lr", s.min_lr);
  s.warmup_shape = json.value("warmup_type", std::string("log")) == "log" ? WarmupShape::Log
                                                                          : WarmupShape::Linear;
  s.warmup_min_ratio = json.value("warmup_min_ratio", s.warmup_min_ratio);
  s.cos_min_ratio = json.value("cos_min_ratio", s.cos_min_ratio);
  if (json.contains("one_cycle")) {
    const Json& c = json.at("one_cycle");
    OneCycleParams& p = s.one_cycle;
    p.first_step_size = c.value("first_step_size", p.first_step_size);
    p.second_step_size = c.value("second_step_size", p.second_step_size);
    p.first_stair_count = c.value("first_stair_count", p.first_stair_count);
    p.second_stair_count = c.value("second_stair_count", p.second_stair_count);
    p.decay_step_size = c.value("decay_step_size", p.decay_step_size);
    p.decay_lr_rate = c.value("decay_lr_rate", p.decay_lr_rate);
    p.cycle_momentum = c.value("cycle_momentum", p.cycle_momentum);
    p.min_mom = c.value("min_mom", p.min_mom);
    p.max_mom = c.value("max_mom", p.max_mom);
    p.decay_mom_rate = c.value("decay_mom_rate", p.decay_mom_rate);
  }
  return s;
}

// Python's repr() of a float, read back to the same double.
double exact(const Json& text) { return std::strtod(text.get<std::string>().c_str(), nullptr); }

void expect_same_bits(double got, double want, const std::string& what) {
  EXPECT_EQ(std::bit_cast<std::uint64_t>(got), std::bit_cast<std::uint64_t>(want))
      << what << ": " << fmt::format("{:.17g} vs the original's {:.17g}", got, want);
}

TEST(LrSchedule, EveryScheduleIsItsOriginalBitForBit) {
  std::ifstream in(test::fixture_path("lr_schedules.json"));
  ASSERT_TRUE(in) << "missing tests/fixtures/lr_schedules.json";
  const Json fixture = Json::parse(in);
  ASSERT_GE(fixture.at("cases").size(), 11u);
  for (const Json& c : fixture.at("cases")) {
    const LrSchedule schedule = schedule_of(c.at("schedule"));
    EXPECT_NO_THROW(validate(schedule)) << c.at("name");
    const AdamWConfig base{.lr = c.at("lr").get<double>(),
                           .beta1 = c.at("betas")[0].get<double>(),
                           .beta2 = c.at("betas")[1].get<double>()};
    const Json& lrs = c.at("lrs");
    for (std::size_t n = 0; n < lrs.size(); ++n) {
      const AdamWConfig now = scheduled_adamw(base, schedule, static_cast<std::int64_t>(n));
      const std::string what = fmt::format("{}, update {}", c.at("name").get<std::string>(), n + 1);
      expect_same_bits(now.lr, exact(lrs[n]), what + " lr");
      expect_same_bits(now.beta1, exact(c.at("beta1s")[n]), what + " beta1");
      expect_same_bits(now.beta2, exact(c.at("beta2s")[n]), what + " beta2");
    }
  }
}

TEST(LrSchedule, ConstantWithoutWarmupIsTheBaseLrExactly) {
  const AdamWConfig base{.lr = 0.1 + 0.2};
  for (const std::int64_t n : {0, 1, 1000}) {
    expect_same_bits(scheduled_adamw(base, {}, n).lr, base.lr, "constant");
  }
}

// --min-lr on a linear decay (zerolab's, as transformers floors its cosine): the decay ends at
// the floor exactly and stays there.
TEST(LrSchedule, LinearAndCosineEndAtTheFloorAndStay) {
  const AdamWConfig base{.lr = 1e-3};
  for (const LrScheduleKind kind : {LrScheduleKind::Linear, LrScheduleKind::Cosine}) {
    const LrSchedule s{.kind = kind, .warmup_steps = 2, .total_steps = 10, .min_lr = 1e-4};
    EXPECT_EQ(scheduled_adamw(base, s, 0).lr, 0.0);
    EXPECT_EQ(scheduled_adamw(base, s, 2).lr, 1e-3);
    double previous = 1e-3;
    for (std::int64_t n = 3; n < 10; ++n) {
      const double lr = scheduled_adamw(base, s, n).lr;
      EXPECT_LT(lr, previous) << lr_schedule_name(kind) << " update " << n + 1;
      previous = lr;
    }
    for (const std::int64_t n : {10, 11, 50}) {
      EXPECT_NEAR(scheduled_adamw(base, s, n).lr, 1e-4, 1e-19) << lr_schedule_name(kind);
    }
  }
}

TEST(LrSchedule, BadValuesAreRefusedNamingTheField) {
  auto message = [](const LrSchedule& s) {
    try {
      validate(s);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message({.warmup_steps = -1}).find("warmup steps -1"), std::string::npos);
  EXPECT_NE(message({.min_lr = -1e-3}).find("min lr"), std::string::npos);
  EXPECT_NE(message({.kind = LrScheduleKind::WarmupCosineLR, .warmup_steps = 0})
                .find("warmup_num_steps"),
            std::string::npos);
  LrSchedule cycle{.kind = LrScheduleKind::OneCycle};
  cycle.one_cycle.first_step_size = 0;
  EXPECT_NE(message(cycle).find("cycle_first_step_size"), std::string::npos);
  cycle.one_cycle.first_step_size = 10;
  cycle.one_cycle.max_mom = 1.0;
  EXPECT_NE(message(cycle).find("beta1"), std::string::npos);
}

}  // namespace
}  // namespace zl
