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

// What the forward rows show, chosen by rank 0's events of the last step: DDP allocates its model
// states once, and in fp32 no number moves; under mixed precision backward sums each unit's
// gradient in an fp32 buffer, rounds it into the unit's 16-bit gradient and frees it.
std::string forward_note(std::span<const Snapshot> events) {
  const auto grads = [](const Snapshot& s) {
    return s.bytes[static_cast<int>(MemCategory::Grads)];
  };
  const auto [low, high] = std::ranges::minmax_element(events, {}, grads);
  const bool moves = std::ranges::any_of(
      events, [&](const Snapshot& s) { return s.bytes != events.front().bytes; });
  std::string says =
      "Each rank runs its own micro-batch through the whole model. The parameters are all there "
      "from the start, on every rank, and so is Adam's state from the previous steps. DDP "
      "allocates its model states once: ";
  if (!moves) return says + "no number below moves during the step.";
  return says + fmt::format(
                    "only the grads column moves, by up to {} bytes. Under mixed precision "
                    "backward sums each unit's gradient in fp32, rounds it into the unit's "
                    "16-bit gradient and frees the fp32 buffer.",
                    grouped(grads(*high) - grads(*low)));
}

std::string_view notes(std::string_view phase) {
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
    const bool mixed = !v.master_after.empty();
    if (mixed) fmt::print("  master  {}   (fp32, updated)\n", slice_text(v.master_after, whole));
    fmt::print("  params  {}{}\n  m       {}\n  v       {}\n", slice_text(v.params_after, whole),
               mixed ? "   (rounded from the master)" : "", slice_text(v.exp_avg, whole),
               slice_text(v.exp_avg_sq, whole));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const LessonSizes defaults{.world = 4,
                             .mlp = MlpConfig{.layers = 3, .width = 64, .in = 16, .classes = 8},
                             .rows = 8,
                             .steps = 3,
                             .seed = 0,
                             .bf16 = false};
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

        const auto categories =
            with_master(config, std::array{MemCategory::Params, MemCategory::Grads,
                                           MemCategory::Optimizer, MemCategory::Activations});
        const std::string forward = wrapped(forward_note(recorder.last_step(0, config.steps)));
        narrate_phase_runs(
            flags, recorder, config.steps, categories,
            [&](std::string_view phase) {
              return phase == "forward" ? std::string_view(forward) : notes(phase);
            },
            [&](std::string_view phase) { show_values(values, config.world, phase); });

        pause(flags, "for the redundancy");
        heading("The redundancy");
        const auto holdings = final_holdings(result);
        print_ranks(holdings,
                    with_master(config, std::array{MemCategory::Params, MemCategory::Grads,
                                                   MemCategory::Optimizer}));
        const bool identical =
            std::ranges::all_of(holdings, [&](const auto& h) { return h == holdings[0]; });
        const std::int64_t per_rank = result.ranks[0].memory.model_state_bytes();
        fmt::print("\nEvery rank holds the same bytes of every category: {}.\n",
                   identical ? "yes" : "NO");
        const std::string redundant =
            config.world == 1
                ? std::string(
                      "On one rank there is no copy to spare: ZeRO wins back only the "
                      "N - 1 copies of N ranks.")
                : fmt::format("{} of the {} copies are redundant -- the memory ZeRO wins back.",
                              config.world - 1, config.world);
        fmt::print("{}\n\n", wrapped(fmt::format("Model states per rank: {} bytes; on all {} "
                                                 "ranks together: {} bytes for one model's {} "
                                                 "bytes of state. {}",
                                                 grouped(per_rank), config.world,
                                                 grouped(per_rank * config.world),
                                                 grouped(per_rank), redundant)));
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
