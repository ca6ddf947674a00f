// lesson_flags.hpp — the sizes a lesson lets the learner change (--world, --stage, the MLP's
// shape, --rows, --steps, --seed, --params) and its precision (--bf16), the flags that set them,
// and how a lesson starts: parse, then run the lesson with one-line errors and exit codes.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string_view>

#include "run/train.hpp"

namespace zl::lessons {

/// The sizes a lesson lets the learner change, holding the lesson's defaults. A lesson offers the
/// flag of each field it sets and no other; after parsing each set field holds the value to use.
struct LessonSizes {
  std::optional<int> world = std::nullopt;  ///< --world: ranks W (N), from min_world up
  int min_world = 1;                        ///< the lowest --world the lesson accepts
  std::optional<int> stage = std::nullopt;  ///< --stage: ZeRO stage, from min_stage to 3
  int min_stage = 0;                        ///< the lowest --stage the lesson accepts
  /// --layers, --width, --in, --classes: the MLP's shape.
  std::optional<MlpConfig> mlp = std::nullopt;
  std::optional<std::int64_t> rows = std::nullopt;   ///< --rows: rows of each rank's micro-batch
  std::optional<std::int64_t> steps = std::nullopt;  ///< --steps: optimizer steps
  std::optional<std::uint64_t> seed = std::nullopt;  ///< --seed: parameter init and data
  /// --params: Ψ, the parameters of the estimated model.
  std::optional<std::int64_t> params = std::nullopt;
  /// --bf16: train in bf16 with an fp32 master (mixed precision, 2 + 2 + 12 bytes per
  /// parameter) instead of fp32 (4 + 4 + 8). Offered when set; the default is false.
  std::optional<bool> bf16 = std::nullopt;
  /// Activation bytes per row of a lesson whose model has no size flags (0: too few to count);
  /// with --world and --rows it bounds how much memory the flags may ask for.
  std::int64_t row_bytes = 0;
};

/// What the command line asked for.
struct LessonFlags {
  bool step = false;     ///< wait for Enter between phases
  LessonSizes sizes;     ///< the lesson's sizes, as the flags set them
  bool defaults = true;  ///< no size flag changed a value: every size is the lesson's default
};

/// Parses --step, --no-pause (forces no pausing, wins over --step), --help (prints usage with the
/// offered sizes and their defaults, exits 0) and the size flags `defaults` offers; a bad value or
/// any other argument is one line on stderr and exit code 2. Then runs `lesson` and returns its
/// exit code; an exception (a zl::Error says what to do) becomes one line on stderr and exit 1.
int run_lesson(int argc, char** argv, std::string_view about, const LessonSizes& defaults,
               const std::function<int(const LessonFlags&)>& lesson);

/// `base` with the world, MLP shape, rows, steps and seed that `flags` holds (the fields the
/// lesson offers; the others stay as in `base`).
TrainConfig sized(TrainConfig base, const LessonFlags& flags);

}  // namespace zl::lessons
