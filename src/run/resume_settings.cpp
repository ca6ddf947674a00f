// resume_settings.cpp — each remembered setting compared with the manifest's, in flag order, so
// the first contradiction is the one reported.
#include "run/resume_settings.hpp"

#include <fmt/format.h>

#include <fstream>
#include <functional>

#include "ckpt/checkpoint.hpp"
#include "ckpt/checkpoint_folder.hpp"
#include "core/error.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;

// One remembered setting: its flag, the two values in words, and how to adopt the manifest's.
struct Remembered {
  ResumeSetting bit;
  std::string_view flag;
  bool same;
  std::string ours;
  std::string theirs;
  std::function<void()> adopt;
};

template <typename T>
Remembered remembered(ResumeSetting bit, std::string_view flag, T& ours, const T& theirs) {
  return {bit, flag, ours == theirs, fmt::format("{}", ours), fmt::format("{}", theirs),
          [&ours, &theirs] { ours = theirs; }};
}

}  // namespace

fs::path resume_step_dir(const CheckpointPlan& plan) {
  std::error_code error;
  const bool own_folder = !plan.dir.empty() && fs::equivalent(plan.resume, plan.dir, error);
  if (own_folder) {
    const std::vector<std::int64_t> steps = committed_steps(plan.dir);
    if (!steps.empty()) return step_dir(plan.dir, steps.back());
  }
  return plan.resume;
}

std::optional<std::string> skipped_latest(const CheckpointPlan& plan, const fs::path& from) {
  if (from == plan.resume) return std::nullopt;  // not the run's own folder: latest is read as is
  const fs::path latest = plan.resume / "latest";
  std::ifstream file(latest);
  std::string named;
  if (!file || !std::getline(file, named) || named == from.filename().string()) {
    return std::nullopt;
  }
  return fmt::format("{} names {}, but {} is the newest committed step: resuming from {}",
                     latest.string(), named, from.filename().string(), from.string());
}

std::vector<std::string> settle_resume_settings(TrainConfig& config, const Manifest& manifest,
                                                const std::string& shown, std::uint32_t given,
                                                bool override) {
  LrSchedule& schedule = config.lr_schedule;
  if (lr_schedule_decays(schedule.kind) && schedule.total_steps == 0 &&
      manifest.lr_schedule.kind == schedule.kind) {
    schedule.total_steps = manifest.lr_schedule.total_steps;  // the decay keeps its end
  }
  AdamWConfig& adamw = config.adamw;
  const AdamWConfig& saved = manifest.adamw;
  Remembered settings[] = {
      remembered(kResumeLr, "--lr", adamw.lr, saved.lr),
      remembered(kResumeBeta1, "--beta1", adamw.beta1, saved.beta1),
      remembered(kResumeBeta2, "--beta2", adamw.beta2, saved.beta2),
      remembered(kResumeEps, "--eps", adamw.eps, saved.eps),
      remembered(kResumeWeightDecay, "--weight-decay", adamw.weight_decay, saved.weight_decay),
      {kResumeSchedule, "--lr-schedule", schedule == manifest.lr_schedule,
       fmt::format("({})", lr_schedule_summary(schedule)),
       fmt::format("({})", lr_schedule_summary(manifest.lr_schedule)),
       [&schedule, &manifest] { schedule = manifest.lr_schedule; }},
      remembered(kResumeSeed, "--seed", config.seed, manifest.seed),
  };
  std::vector<std::string> changes;
  for (Remembered& setting : settings) {
    if (setting.same) continue;
    if ((given & setting.bit) == 0) {
      changes.push_back(fmt::format("{} {} from the checkpoint ({})", setting.flag, setting.theirs,
                                    shown));
      setting.adopt();
      continue;
    }
    ZL_CHECK(override,
             "{} {} contradicts the checkpoint's {} ({}): leave the setting out to continue with "
             "the checkpoint's, or add --resume-override to change it",
             setting.flag, setting.ours, setting.theirs, shown);
    changes.push_back(fmt::format("{} {} replaces the checkpoint's {} ({})", setting.flag,
                                  setting.ours, setting.theirs, shown));
  }
  return changes;
}

}  // namespace zl
