// lesson_flags.cpp — the lessons' command line: --step, --no-pause, --help and the sizes each
// lesson offers (CLI11), with one-line errors for bad values and for sizes too big to run.
#include "lesson_flags.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <exception>
#include <string>

#include "core/error.hpp"
#include "engines/estimate.hpp"

namespace zl::lessons {

namespace {

// Largest --world a lesson accepts: one thread per simulated rank.
constexpr int kMaxWorld = 64;
// Largest --width/--in/--classes and --rows: the lessons print per-rank tables, not benchmarks.
constexpr std::int64_t kMaxSize = 4096;

// Adds the size flags `sizes` offers to `app`, each bound to its field.
void add_size_flags(CLI::App& app, LessonSizes& sizes) {
  if (sizes.world) {
    app.add_option("--world", *sizes.world, "ranks W")
        ->check(CLI::Range(sizes.min_world, kMaxWorld))
        ->capture_default_str();
  }
  if (sizes.stage) {
    app.add_option("--stage", *sizes.stage, "ZeRO stage (0 is DDP)")
        ->check(CLI::Range(sizes.min_stage, 3))
        ->capture_default_str();
  }
  if (sizes.mlp) {
    app.add_option("--layers", sizes.mlp->layers, "Linear layers of the MLP, one unit each")
        ->check(CLI::Range(1, 16))
        ->capture_default_str();
    app.add_option("--width", sizes.mlp->width, "outputs of every layer but the last")
        ->check(CLI::Range(std::int64_t{1}, kMaxSize))
        ->capture_default_str();
    app.add_option("--in", sizes.mlp->in, "features per sample (inputs of the first layer)")
        ->check(CLI::Range(std::int64_t{1}, kMaxSize))
        ->capture_default_str();
    app.add_option("--classes", sizes.mlp->classes, "outputs of the last layer")
        ->check(CLI::Range(std::int64_t{1}, kMaxSize))
        ->capture_default_str();
  }
  if (sizes.rows) {
    app.add_option("--rows", *sizes.rows, "rows of each rank's micro-batch")
        ->check(CLI::Range(std::int64_t{1}, kMaxSize))
        ->capture_default_str();
  }
  if (sizes.steps) {
    app.add_option("--steps", *sizes.steps, "optimizer steps")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1000}))
        ->capture_default_str();
  }
  if (sizes.seed) {
    app.add_option("--seed", *sizes.seed, "seed of the parameter init and the data")
        ->check(CLI::Range(std::uint64_t{0}, std::uint64_t{0xFFFF'FFFF}))
        ->capture_default_str();
  }
  if (sizes.params) {
    app.add_option("--params", *sizes.params, "Ψ, parameters of the model to estimate")
        ->check(CLI::Range(std::int64_t{1}, std::int64_t{1'000'000'000'000'000}))
        ->capture_default_str();
  }
  if (sizes.bf16) {
    app.add_flag("--bf16", *sizes.bf16,
                 "train in bf16 with an fp32 master (mixed precision: 2 + 2 + 12 bytes per "
                 "parameter) instead of fp32 (4 + 4 + 8)");
  }
}

// The most memory a lesson's run may take over all its simulated ranks, roughly: every rank's
// 16 bytes of model state per parameter plus its fp32 activations, 2 per feature of each row.
constexpr double kMaxRunBytes = 2e9;

// One line naming the sizes and what to do when the run would take more than kMaxRunBytes. A
// lesson whose model has no size flags counts sizes.row_bytes per row.
std::optional<std::string> too_big(const LessonSizes& sizes) {
  const double world = sizes.world ? *sizes.world : 1;
  const double rows = sizes.rows ? static_cast<double>(*sizes.rows) : 1;
  double bytes = 0.0;
  if (sizes.mlp) {
    const MlpConfig& mlp = *sizes.mlp;
    const double features = static_cast<double>(mlp.in + mlp.layers * mlp.width + mlp.classes);
    bytes = world * (16.0 * static_cast<double>(mlp_param_count(mlp)) + 8.0 * rows * features);
  } else {
    bytes = world * rows * static_cast<double>(sizes.row_bytes);
  }
  if (bytes <= kMaxRunBytes) return std::nullopt;
  const std::string smaller =
      sizes.mlp ? "--world, --width, --layers or --rows" : "--world or --rows";
  return fmt::format(
      "these sizes would take about {:.1f} GB over {} ranks, more than the {:.0f} GB a lesson "
      "allows: use a smaller {}",
      bytes / 1e9, world, kMaxRunBytes / 1e9, smaller);
}

// True when every offered size holds its default.
bool same_sizes(const LessonSizes& a, const LessonSizes& b) {
  const auto same_mlp = [](const std::optional<MlpConfig>& x, const std::optional<MlpConfig>& y) {
    return x.has_value() == y.has_value() &&
           (!x || (x->layers == y->layers && x->width == y->width && x->in == y->in &&
                   x->classes == y->classes));
  };
  return a.world == b.world && a.stage == b.stage && same_mlp(a.mlp, b.mlp) && a.rows == b.rows &&
         a.steps == b.steps && a.seed == b.seed && a.params == b.params && a.bf16 == b.bf16;
}

// --step, --no-pause (wins over --step), --help and the offered sizes; a bad flag exits 2.
LessonFlags parse_flags(int argc, char** argv, std::string_view about,
                        const LessonSizes& defaults) {
  LessonFlags flags;
  flags.sizes = defaults;
  bool no_pause = false;
  CLI::App app{std::string(about), argv[0]};
  app.add_flag("--step", flags.step, "wait for Enter between phases");
  app.add_flag("--no-pause", no_pause, "run straight through (the default; overrides --step)");
  add_size_flags(app, flags.sizes);
  app.allow_extras();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) std::exit(app.exit(error));
    fmt::print(stderr, "{}: {}: see --help\n", argv[0], error.what());
    std::exit(2);
  }
  if (!app.remaining().empty()) {
    fmt::print(stderr, "{}: unknown flag '{}': see --help for the flags this lesson takes\n",
               argv[0], app.remaining().front());
    std::exit(2);
  }
  if (const auto error = too_big(flags.sizes)) {
    fmt::print(stderr, "{}: {}\n", argv[0], *error);
    std::exit(2);
  }
  if (no_pause) flags.step = false;
  flags.defaults = same_sizes(flags.sizes, defaults);
  return flags;
}

}  // namespace

int run_lesson(int argc, char** argv, std::string_view about, const LessonSizes& defaults,
               const std::function<int(const LessonFlags&)>& lesson) {
  const LessonFlags flags = parse_flags(argc, argv, about, defaults);
  try {
    return lesson(flags);
  } catch (const Error& error) {
    fmt::print(stderr, "{}: {}\n", argv[0], error.what());
    return exit_code_of(error.kind());  // the zerolab command's rule
  } catch (const std::exception& error) {
    fmt::print(stderr, "{}: {}\n", argv[0], error.what());
    return 1;
  }
}

TrainConfig sized(TrainConfig base, const LessonFlags& flags) {
  const LessonSizes& sizes = flags.sizes;
  if (sizes.world) base.world = *sizes.world;
  if (sizes.mlp) base.mlp = *sizes.mlp;
  if (sizes.rows) base.micro_batch = *sizes.rows;
  if (sizes.steps) base.steps = *sizes.steps;
  if (sizes.seed) base.seed = *sizes.seed;
  if (sizes.bf16 && *sizes.bf16) base.features.precision = DType::BF16;
  return base;
}

}  // namespace zl::lessons
