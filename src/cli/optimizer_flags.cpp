// optimizer_flags.cpp — the `zerolab train` flags of the optimizer, its schedule and the seed,
// and which of them a run set (what --resume does not take from the checkpoint).
#include <charconv>
#include <limits>
#include <map>
#include <string>
#include <string_view>
#include <utility>

#include "cli/train_flag_groups.hpp"
#include "core/error.hpp"
#include "run/resume_settings.hpp"

namespace zl {
namespace {

const std::map<std::string, LrScheduleKind> kLrScheduleNames = {
    {"constant", LrScheduleKind::Constant},
    {"linear", LrScheduleKind::Linear},
    {"cosine", LrScheduleKind::Cosine}};

// The learning-rate schedule's flags, applied over --config's `scheduler` section.
void add_schedule_flags(CLI::App& cmd, LrSchedule& schedule) {
  cmd.add_option_function<std::string>(
         "--lr-schedule",
         [&schedule](const std::string& name) { schedule.kind = kLrScheduleNames.at(name); },
         "constant | linear | cosine: the lr rises linearly from 0 over --warmup-steps updates, "
         "then stays (constant) or falls to --min-lr at --decay-steps (as transformers' "
         "get_*_schedule_with_warmup)")
      ->transform(CLI::IsMember({"constant", "linear", "cosine"}, CLI::ignore_case))
      ->default_str("constant");
  cmd.add_option("--warmup-steps", schedule.warmup_steps, "Updates of linear warmup from lr 0")
      ->default_str("0");
  cmd.add_option("--min-lr", schedule.min_lr, "The lr a linear or cosine decay ends at")
      ->default_str("0");
  cmd.add_option("--decay-steps", schedule.total_steps,
                 "The update a linear or cosine decay ends at (after it the lr stays at --min-lr)")
      ->default_str("--steps");
}

// Each remembered setting's flag, once given, is marked in args.settings_given.
void mark_resume_settings(CLI::App& cmd, TrainArgs& args) {
  const std::pair<std::string_view, ResumeSetting> flags[] = {
      {"--lr", kResumeLr},           {"--beta1", kResumeBeta1},
      {"--beta2", kResumeBeta2},     {"--eps", kResumeEps},
      {"--weight-decay", kResumeWeightDecay}, {"--lr-schedule", kResumeSchedule},
      {"--warmup-steps", kResumeSchedule},    {"--min-lr", kResumeSchedule},
      {"--decay-steps", kResumeSchedule},     {"--seed", kResumeSeed}};
  for (const auto& [flag, bit] : flags) {
    cmd.get_option(std::string(flag))->each([&args, bit = bit](const std::string&) {
      args.settings_given |= bit;
    });
  }
}

}  // namespace

void add_optimizer_flags(CLI::App& cmd, TrainArgs& args) {
  TrainConfig& config = args.config;
  cmd.add_option("--lr", config.adamw.lr, "AdamW learning rate (--model gpt: 3e-3 unless given)")
      ->capture_default_str()
      ->each([&args](const std::string&) { args.lr_given = true; });
  cmd.add_option("--weight-decay", config.adamw.weight_decay, "AdamW decoupled weight decay")
      ->capture_default_str();
  cmd.add_option("--beta1", config.adamw.beta1, "AdamW beta1")->capture_default_str();
  cmd.add_option("--beta2", config.adamw.beta2, "AdamW beta2")->capture_default_str();
  cmd.add_option("--eps", config.adamw.eps, "AdamW eps")->capture_default_str();
  add_schedule_flags(cmd, config.lr_schedule);
  cmd.add_option_function<std::string>(
         "--seed",
         [&config](const std::string& text) {
           // Parsed here: CLI11 would wrap "-1" around to 2^64 - 1.
           std::uint64_t seed = 0;
           const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seed);
           ZL_CHECK(!text.empty() && error == std::errc() && end == text.data() + text.size(),
                    "--seed {} is invalid: use a whole number from 0 to {}", text,
                    std::numeric_limits<std::uint64_t>::max());
           config.seed = seed;
         },
         "Seed of parameter init and data")
      ->default_str("0");
  mark_resume_settings(cmd, args);
}

std::uint32_t settings_of(const DsConfig& ds) {
  std::uint32_t bits = 0;
  if (ds.adamw) bits |= kResumeLr | kResumeBeta1 | kResumeBeta2 | kResumeEps | kResumeWeightDecay;
  if (ds.scheduler_peak_lr) bits |= kResumeLr;
  if (ds.lr_schedule) bits |= kResumeSchedule;
  return bits;
}

}  // namespace zl
