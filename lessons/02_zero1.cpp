// 02_zero1.cpp — lesson 02: ZeRO stage 1 shards Adam's state. On a model small enough that every
// number fits on screen: how units are padded and cut into shards, then reduce-scatter, update the
// own shard, all-gather; and why that costs no more traffic than DDP.
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
    return "As in DDP, parameters and gradients are whole on every rank. Adam's moments are not:\n"
           "each rank keeps m and v (and with --bf16 the fp32 master) for its own shard only.";
  }
  if (phase == "backward")
    return "Backward fills every unit's full gradient on every rank, as in DDP.";
  if (phase == "reduce_scatter") {
    return "Reduce-scatter (average) each unit's gradient: rank r receives the mean over all ranks "
           "of\n"
           "its own [begin, end) only. The rest of its gradient buffer is never read again this "
           "step.";
  }
  if (phase == "update") {
    return "AdamW on the own shard only: rank r updates parameters [begin, end) (with --bf16 its\n"
           "fp32 master shard, then rounds it into them) from its averaged gradient shard and its\n"
           "moments. The other slices of its parameters are now stale.";
  }
  return "All-gather each unit's parameters: every rank sends its updated shard to all others, "
         "and\n"
         "every rank holds the whole, current model again.";
}

// How each unit is padded and cut into shards, and how much of it is padding.
void print_partition(const TrainConfig& config, const TrainResult& result) {
  fmt::print(
      "Each unit is one flat buffer: its parameters back to back, then zeros up to a multiple\n"
      "of W·64, so every rank's shard is the same size and a whole number of the 64-element\n"
      "blocks the gradient norm is summed in. Rank r owns [r·S, (r+1)·S).\n\n");
  for (const auto& unit : result.layout) {
    fmt::print("{}: numel {}, padded {}, shard S = {}\n", unit.name, unit.numel, unit.padded_elems,
               unit.shard_elems);
    for (const auto& slot : unit.params) {
      fmt::print("  {:<18} shape {:<9} elements [{}, {})\n", slot.name, shape_string(slot.shape),
                 slot.offset_elems, slot.offset_elems + slot.numel);
    }
    for (int r = 0; r < config.world; ++r) {
      const ShardRange shard = shard_of(unit, r, config.world);
      const std::int64_t real = std::clamp<std::int64_t>(unit.numel - shard.begin, 0, shard.size());
      fmt::print("  rank {} owns [{}, {}): {} real elements, {} of padding\n", r, shard.begin,
                 shard.end, real, shard.size() - real);
    }
  }
  const std::int64_t psi = total_numel(result.layout);
  const std::int64_t padding = total_padded_elems(result.layout) - psi;
  fmt::print(
      "\nPadding: {} of {} elements ({:.1f}%). A unit gains fewer than W·64 = {} zeros, so at "
      "real\n"
      "sizes (millions of parameters per unit) the padding is nothing; on a toy of a few dozen\n"
      "parameters (try --width 3 --in 2 --classes 2 --layers 2) it is most of every shard.\n",
      grouped(padding), grouped(psi + padding),
      100.0 * static_cast<double>(padding) / static_cast<double>(psi + padding),
      config.world * kNormBlockElems);
}

// The numbers of the first unit at each phase of the last step.
void show_values(const StepValues& values, int world, std::string_view phase) {
  const UnitLayout& unit = values.layout.front();
  const UnitValues& v = values.units.front();
  const ShardRange whole{0, unit.padded_elems};
  if (phase == "forward") {
    fmt::print("{}'s parameters, whole and the same on every rank:\n  {}\n", unit.name,
               slice_text(v.params_before, whole));
  } else if (phase == "backward") {
    print_local_grads(v, unit, world);
  } else if (phase == "reduce_scatter") {
    fmt::print("{}'s gradient, shard by shard: what each rank sends, what the owner receives:\n",
               unit.name);
    print_reduce_scatter(v, unit, world);
  } else if (phase == "update") {
    fmt::print("{}: each rank's own shard, before and after AdamW, and its moments:\n", unit.name);
    print_update(v, unit, world);
  } else if (phase == "all_gather") {
    fmt::print("{}: each rank sends its updated shard; every rank receives all of them:\n",
               unit.name);
    print_shards("sends", v.params_after, unit, world);
    fmt::print("  every rank now holds {}\n", slice_text(v.params_after, whole));
  }
}

}  // namespace

int main(int argc, char** argv) {
  const LessonSizes defaults{.world = 4,
                             .mlp = MlpConfig{.layers = 3, .width = 64, .in = 16, .classes = 64},
                             .rows = 8,
                             .steps = 3,
                             .seed = 0,
                             .bf16 = false};
  return run_lesson(
      argc, argv, "Lesson 02: ZeRO-1 shards the optimizer state", defaults,
      [](const LessonFlags& flags) {
        TrainConfig base;
        base.engine = EngineKind::Zero1;
        const TrainConfig config = sized(base, flags);

        EventRecorder recorder(config.world);
        const TrainResult result = train(config, {}, recorder.observer());
        const StepValues values = step_values(config, result);

        heading("Lesson 02: ZeRO-1, shard the optimizer state");
        print_model(config, result);

        pause(flags, "for the partition");
        heading("The partition (engines/partition.hpp)");
        print_partition(config, result);

        const auto categories =
            with_master(config, std::array{MemCategory::Params, MemCategory::Grads,
                                           MemCategory::Optimizer, MemCategory::Activations});
        narrate_phase_runs(
            flags, recorder, config.steps, categories, notes,
            [&](std::string_view phase) { show_values(values, config.world, phase); });

        pause(flags, "for the traffic");
        heading("Traffic: does sharding cost communication?");
        const auto [zero1_bytes, ddp_bytes] = traffic_beside_ddp("ZeRO-1", config, result);
        fmt::print(
            "\nDDP all-reduces the gradients: 2Ψ(N-1)/N per step. ZeRO-1 reduce-scatters them, "
            "(N-1)/N·Ψ,\n"
            "and all-gathers the parameters, (N-1)/N·Ψ: also 2Ψ(N-1)/N. Measured over {} steps:\n"
            "ZeRO-1 {} bytes, DDP {} bytes: {}.\n",
            config.steps, grouped(zero1_bytes), grouped(ddp_bytes),
            zero1_bytes == ddp_bytes ? "the same" : "NOT the same");
        fmt::print(
            "A naive ZeRO-1 that all-reduced the gradients as DDP does and then all-gathered the "
            "updated\n"
            "parameters would send 2Ψ(N-1)/N + Ψ(N-1)/N = 3Ψ(N-1)/N, 1.5x as much. An all-reduce "
            "is a\n"
            "reduce-scatter plus an all-gather; each rank only reads its own slice of the "
            "averaged\n"
            "gradient, so the gradient's all-gather half is what ZeRO-1 leaves out.\n\n");

        pause(flags, "for real scale");
        heading("At real scale");
        const double padding_percent = print_real_memory(std::array{0, 1});
        const std::int64_t toy_psi = total_numel(result.layout);
        const double toy_padding_percent =
            100.0 * static_cast<double>(total_padded_elems(result.layout) - toy_psi) /
            static_cast<double>(toy_psi);
        fmt::print(
            "\n{}\n\n",
            wrapped(fmt::format(
                "The padding, {:.1f}% of this toy's Ψ, is at most {:.4f}% of Ψ here. "
                "ZeRO-1 divides only the optimizer's 12 of 16 bytes: 4Ψ + 12Ψ/N tends to 4Ψ, a "
                "quarter of DDP, as N grows, and is not yet there at 8 GPUs.",
                toy_padding_percent, padding_percent)));
        const bool states_ok = check_model_states(config, result);
        fmt::print("\n");
        const bool values_ok = check_values(values, result);
        const bool same = matches_reference(config, result);
        return zero1_bytes == ddp_bytes && states_ok && values_ok && same ? 0 : 1;
      });
}
