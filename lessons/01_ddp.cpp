// 01_ddp.cpp — lesson 01: plain data parallelism. Every rank holds the whole model, all of its
// gradients and all of Adam's state; after the all-reduce the ranks hold identical copies. Those
// W - 1 extra copies are the redundancy ZeRO removes.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "lesson_scale.hpp"
#include "lesson_support.hpp"
#include "lesson_values.hpp"

using namespace zl;
using namespace zl::lessons;

namespace {

std::string_view notes(std::string_view phase) {
  if (phase == "forward") {
    return "Each rank runs its own micro-batch through the whole model. The parameters are all\n"
           "there from the start, on every rank, and so is Adam's state from the previous steps.\n"
           "DDP allocates everything once: no number below moves during the step.";
  }
  if (phase == "backward") {
    return "Backward fills the full gradient of every unit. Each rank's gradient is still its "
           "own:\n"
           "it comes from its own rows.";
  }
  if (phase == "all_reduce") {
    return "All-reduce (average) each unit's gradient: afterwards every rank holds the same mean\n"
           "gradient, 2Ψ(N-1)/N elements sent per rank.";
  }
  return "Every rank runs the same AdamW over the whole model with the same gradient: identical\n"
         "parameters and identical moments, computed N times.";
}

// The numbers of the first unit at each phase of the last step.
void show_values(const StepValues& values, int world, std::string_view phase) {
  const UnitLayout& unit = values.layout.front();
  const UnitValues& v = values.units.front();
  const ShardRange whole{0, unit.padded_elems};
  if (phase == "forward") {
    fmt::print("{}'s parameters, the same on every rank:\n  {}\n", unit.name,
               slice_text(v.params_before, whole));
  } else if (phase == "backward") {
    print_local_grads(v, unit, world);
  } else if (phase == "all_reduce") {
    fmt::print(
        "{}'s gradient on every rank after the all-reduce, the sum of the above / {}:\n  {}\n",
        unit.name, world, slice_text(v.averaged, whole));
  } else if (phase == "update") {
    fmt::print("{} on every rank after AdamW, each computed {} times:\n", unit.name, world);
    fmt::print("  params  {}\n  m       {}\n  v       {}\n", slice_text(v.params_after, whole),
               slice_text(v.exp_avg, whole), slice_text(v.exp_avg_sq, whole));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const LessonSizes defaults{.world = 4,
                             .mlp = MlpConfig{.layers = 3, .width = 64, .in = 16, .classes = 8},
                             .rows = 8,
                             .steps = 3,
                             .seed = 0};
  return run_lesson(
      argc, argv, "Lesson 01: DDP keeps everything on every rank", defaults,
      [](const LessonFlags& flags) {
        TrainConfig base;
        base.engine = EngineKind::Ddp;
        const TrainConfig config = sized(base, flags);

        // Train first, recording each rank's ledger at every engine event; narrate afterwards.
        EventRecorder recorder(config.world);
        const TrainResult result = train(config, {}, recorder.observer());
        const StepValues values = step_values(config, result);

        heading("Lesson 01: DDP, everything replicated");
        print_model(config, result);
        fmt::print("\nBelow: every rank's memory ledger after each phase of the last step.\n");

        const std::array categories = {MemCategory::Params, MemCategory::Grads,
                                       MemCategory::Optimizer, MemCategory::Activations};
        narrate_phase_runs(
            flags, recorder, config.steps, categories, notes,
            [&](std::string_view phase) { show_values(values, config.world, phase); });

        pause(flags, "for the redundancy");
        heading("The redundancy");
        const auto holdings = final_holdings(result);
        const std::array states = {MemCategory::Params, MemCategory::Grads, MemCategory::Optimizer};
        print_ranks(holdings, states);
        const bool identical =
            std::ranges::all_of(holdings, [&](const auto& h) { return h == holdings[0]; });
        const std::int64_t per_rank = holdings[0][static_cast<std::size_t>(MemCategory::Params)] +
                                      holdings[0][static_cast<std::size_t>(MemCategory::Grads)] +
                                      holdings[0][static_cast<std::size_t>(MemCategory::Optimizer)];
        fmt::print("\nEvery rank holds the same bytes of every category: {}.\n",
                   identical ? "yes" : "NO");
        fmt::print(
            "Model states per rank: {} bytes; on all {} ranks together: {} bytes for one model's\n"
            "{} bytes of state. {} of the {} copies are redundant -- the memory ZeRO wins "
            "back.\n\n",
            grouped(per_rank), config.world, grouped(per_rank * config.world), grouped(per_rank),
            config.world - 1, config.world);
        pause(flags, "for real scale");
        heading("At real scale");
        print_real_memory(std::array{0});
        fmt::print(
            "\nDDP's bytes per GPU are the same at 8 GPUs and at 64: adding GPUs adds copies, "
            "never\n"
            "room. A 7B model's 16Ψ = 112 GB fits on no 80 GB GPU, however many there are.\n\n");
        const bool states_ok = check_model_states(config, result);

        fmt::print("\n");
        const bool values_ok = check_values(values, result);
        const bool same = matches_reference(config, result);
        return identical && states_ok && values_ok && same ? 0 : 1;
      });
}
