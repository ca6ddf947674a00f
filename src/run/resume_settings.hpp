// resume_settings.hpp — what a resumed run takes from the checkpoint it resumes: the optimizer's
// settings, the learning-rate schedule and the seed (the data stream), as the manifest recorded
// them. The batch shape is free: the stream continues by global sample, so a resume at another
// world may change the micro-batch and accumulation. A setting the caller did not set is taken from
// the manifest; one set to another value is an error naming the flag, both values and what to do,
// unless the override is asked for
// (--resume-override), and then each change is one line the caller prints.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "ckpt/manifest.hpp"
#include "run/train.hpp"

namespace zl {

/// The settings a checkpoint remembers, as bits of a mask.
enum ResumeSetting : std::uint32_t {
  kResumeLr = 1u << 0,           ///< --lr (optimizer.params.lr, warmup_max_lr, cycle_max_lr)
  kResumeBeta1 = 1u << 1,        ///< --beta1
  kResumeBeta2 = 1u << 2,        ///< --beta2
  kResumeEps = 1u << 3,          ///< --eps
  kResumeWeightDecay = 1u << 4,  ///< --weight-decay
  kResumeSchedule = 1u << 5,     ///< --lr-schedule, --warmup-steps, --min-lr, --decay-steps
  kResumeSeed = 1u << 6,         ///< --seed: the data stream
};

/// Every ResumeSetting: a caller that says nothing has set them all.
inline constexpr std::uint32_t kAllResumeSettings = (1u << 7) - 1;

/// The step directory a resume from `plan` reads: plan.resume, or, when it is the folder the run
/// saves to, that folder's newest committed step (whatever `latest` says).
std::filesystem::path resume_step_dir(const CheckpointPlan& plan);

/// When a resume from `plan` reads `from` (resume_step_dir) although the folder's `latest` names
/// another step (a save killed before it moved `latest`, or a `latest` written by hand), the line
/// that says so ("DIR/latest names step-4, but step-6 is the newest committed step: resuming
/// from step-6"); nullopt when `latest` names `from` or the folder has none.
std::optional<std::string> skipped_latest(const CheckpointPlan& plan,
                                          const std::filesystem::path& from);

/// Settles `config` against `manifest` (read from `shown`): each differing setting not in `given`
/// is taken from the manifest; each one in `given` that differs throws zl::Error naming the flag
/// and both values, unless `override`, when it stays. Returns one line per setting taken or
/// kept, for the caller to print. A decay whose end is 0 (the run's --steps) keeps the
/// checkpoint's end.
std::vector<std::string> settle_resume_settings(TrainConfig& config, const Manifest& manifest,
                                                const std::string& shown, std::uint32_t given,
                                                bool override);

}  // namespace zl
