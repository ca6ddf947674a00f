// 07_checkpoints.cpp — sharded checkpoints that move between stages and world sizes: ZeRO-3 on 4
// ranks saves one file per rank; ZeRO-1 resumes it on 4 ranks bit for bit, and on 2 ranks after
// re-slicing every unit; `consolidate` streams the shards into one file of full parameters.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "ckpt/consolidate.hpp"
#include "ckpt/safetensors.hpp"
#include "lesson_support.hpp"
#include "run/compare.hpp"

using namespace zl;
using namespace zl::lessons;
namespace fs = std::filesystem;

namespace {

constexpr std::string_view kSave =
    "Every stage saves the same thing: its shard of the shared partition (parameters as fp32,\n"
    "Adam's two moments), one safetensors file per rank, plus manifest.json with the stage, the\n"
    "world, the step, the data position, the unit layout and a sha256 per file. Files are\n"
    "written to a temporary name and renamed, the manifest last, so a crash never leaves a\n"
    "half-written checkpoint.";
constexpr std::string_view kSameWorld =
    "ZeRO-1 at the same world size loads the same shards: it keeps whole parameters, so it\n"
    "all-gathers them, and its Adam shards are exactly ZeRO-3's. The continued run is the\n"
    "uninterrupted one, bit for bit.";
// Sizes this lesson cannot run are a request that cannot work (exit code 2): it saves halfway
// and resumes, and the samples of a step must split over the `other` ranks it resumes on.
void check_sizes(int world, std::int64_t rows, std::int64_t steps, int other) {
  with_error_kind(ErrorKind::Usage, [&] {
    ZL_CHECK(steps >= 2, "--steps {}: the lesson saves halfway and resumes, give --steps 2 or more",
             steps);
    ZL_CHECK(world * rows % other == 0,
             "--world {} x --rows {} samples per step do not split over {} ranks: make one of them "
             "even",
             world, rows, other);
  });
}

// Resuming on `other` ranks what `world` ranks of `rows` rows saved.
std::string other_world_note(int world, std::int64_t rows, int other) {
  return wrapped(fmt::format(
      "On another number of ranks every unit is padded and cut differently, so each rank reads "
      "the element ranges it now owns from the old files. The data continue by global sample: "
      "with the rows per rank scaled ({} ranks x {} rows become {} x {}), each step sees the same "
      "samples as before. What can change is the order of the fp32 sums over ranks.",
      world, rows, other, world * rows / other));
}

// The lesson's run as the flags size it, on `world` ranks of `micro_batch` rows each.
TrainConfig config_of(const LessonFlags& flags, EngineKind engine, int world,
                      std::int64_t micro_batch) {
  TrainConfig base;
  base.engine = engine;
  base.adamw.lr = 1e-2;
  TrainConfig config = sized(base, flags);
  config.world = world;
  config.micro_batch = micro_batch;
  return config;
}

double largest_difference(const ModelState& a, const ModelState& b) {
  double largest = 0.0;
  for (std::size_t u = 0; u < a.params.size(); ++u) {
    for (std::size_t i = 0; i < a.params[u].size(); ++i) {
      largest = std::max(largest, std::abs(static_cast<double>(a.params[u][i]) - b.params[u][i]));
    }
  }
  return largest;
}

// Consolidates the last checkpoint under `checkpoints` into `out`, lists its tensors, and checks
// they are `final_state`'s parameters exactly.
bool consolidate_and_check(const fs::path& checkpoints, const fs::path& out,
                           const ModelState& final_state) {
  const ConsolidateResult written = consolidate(checkpoints, out, /*with_optimizer=*/false);
  fmt::print("{} tensors, {} parameters (padding removed), {} bytes, from step {}:\n",
             written.tensors, grouped(written.param_elems),
             grouped(static_cast<std::int64_t>(written.output_bytes)), written.step);
  const auto tensors = read_safetensors(out);
  for (const auto& tensor : tensors) {
    fmt::print("  {:<18} {}\n", tensor.name, shape_string(tensor.shape));
  }
  // The last checkpoint is the saving run's final state, which equals the uninterrupted
  // ZeRO-1 run's bit for bit.
  std::vector<float> flat;
  for (const auto& tensor : tensors) {
    const auto values = to_floats(tensor);
    flat.insert(flat.end(), values.begin(), values.end());
  }
  std::vector<float> expected;
  for (const auto& unit : final_state.params)
    expected.insert(expected.end(), unit.begin(), unit.end());
  const bool consolidated = flat == expected;
  fmt::print("\n{}: the consolidated file holds the final parameters exactly\n",
             consolidated ? "ok" : "DIFFERENT");
  return consolidated;
}

}  // namespace

int main(int argc, char** argv) {
  const LessonSizes defaults{.world = 4,
                             .stage = 3,
                             .mlp = MlpConfig{.layers = 3, .width = 48, .in = 12, .classes = 6},
                             .rows = 4,
                             .steps = 6,
                             .seed = 0};
  return run_lesson(
      argc, argv, "Lesson 07: checkpoints across stages and world sizes", defaults,
      [](const LessonFlags& flags) {
        const int world = *flags.sizes.world;
        const std::int64_t rows = *flags.sizes.rows;
        const std::int64_t steps = *flags.sizes.steps;
        // The other world: 2 ranks (1 when the run has 2), the same samples per step.
        const int other = world == 2 ? 1 : 2;
        check_sizes(world, rows, steps, other);
        const EngineKind saver = engine_of_stage(*flags.sizes.stage);
        const std::int64_t half = steps / 2;
        const fs::path dir =
            fs::temp_directory_path() / fmt::format("zerolab_lesson07_{}", ::getpid());
        fs::remove_all(dir);
        heading(fmt::format("Lesson 07: save under {} on {} ranks", engine_name(saver), world));
        fmt::print("{}\n\n", kSave);
        CheckpointPlan save;
        save.dir = dir / "ckpt";
        save.every_steps = half;
        train(config_of(flags, saver, world, rows), {}, {}, save);
        const fs::path step3 = step_dir(save.dir, half);
        std::vector<fs::path> files;
        for (const auto& entry : fs::directory_iterator(step3)) files.push_back(entry.path());
        std::ranges::sort(files);
        for (const auto& file : files) {
          fmt::print("  {:<24} {:>8} bytes\n", file.filename().string(),
                     grouped(static_cast<std::int64_t>(fs::file_size(file))));
        }

        pause(flags, "for resuming under ZeRO-1 on the same ranks");
        heading(fmt::format("Resume under ZeRO-1 on {} ranks", world));
        fmt::print("{}\n\n", kSameWorld);
        CheckpointPlan resume;
        resume.resume = step3;
        const TrainConfig same_world = config_of(flags, EngineKind::Zero1, world, rows);
        const TrainResult uninterrupted4 = train(same_world);
        const TrainResult resumed4 = train(same_world, {}, {}, resume);
        const bool bitwise = !first_difference("params", resumed4.final_state.params,
                                               uninterrupted4.final_state.params);
        fmt::print("{}: resumed at step {}, final parameters {} the uninterrupted run's\n\n",
                   bitwise ? "ok" : "DIFFERENT", half, bitwise ? "bit for bit" : "not");

        pause(flags, fmt::format("for resuming on {} ranks", other));
        heading(fmt::format("Resume under ZeRO-1 on {} ranks", other));
        fmt::print("{}\n\n", other_world_note(world, rows, other));
        const TrainConfig other_world =
            config_of(flags, EngineKind::Zero1, other, world * rows / other);
        const TrainResult uninterrupted2 = train(other_world);
        const TrainResult resumed2 = train(other_world, {}, {}, resume);
        const double difference =
            largest_difference(resumed2.final_state, uninterrupted2.final_state);
        double largest = 0.0;
        for (const auto& unit : uninterrupted2.final_state.params)
          for (const float value : unit)
            largest = std::max(largest, std::abs(static_cast<double>(value)));
        const bool close = difference <= 1e-5 * largest;
        fmt::print(
            "{}\n\n",
            wrapped(fmt::format(
                "{}: largest difference {:.3g} against parameters up to {:.3g} (allowed 1e-5 of "
                "it): {}",
                close ? "ok" : "TOO FAR", difference, largest,
                difference == 0.0
                    ? "here even bit for bit, the sums kept their order"
                    : "close to an uninterrupted run on the new ranks, not bitwise")));

        pause(flags, "for consolidating");
        heading("Consolidate");
        const bool consolidated =
            consolidate_and_check(save.dir, dir / "full.safetensors", uninterrupted4.final_state);
        fs::remove_all(dir);
        return bitwise && close && consolidated ? 0 : 1;
      });
}
