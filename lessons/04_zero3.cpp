// 04_zero3.cpp — lesson 04: ZeRO stage 3 shards the parameters too. A unit's full parameters exist
// only while it computes: gather, run, release, in the forward pass and again in the backward pass.
// The price is one more all-gather of the parameters per step: 1.5x DDP's traffic.
#include <fmt/format.h>

#include <array>

#include "core/dtype.hpp"
#include "lesson_scale.hpp"
#include "lesson_support.hpp"
#include "lesson_values.hpp"

using namespace zl;
using namespace zl::lessons;

namespace {

constexpr std::string_view kForward =
    "Each rank keeps only its shard of everything: parameters, gradients, Adam's moments. To run "
    "unit u the engine all-gathers u's parameters into a temporary buffer (gathered), runs it, "
    "and frees the buffer before gathering the next unit.";

// kForward, then what the gathered column shows for this model's units.
std::string forward_note(const std::vector<UnitLayout>& layout) {
  if (layout.size() == 1) {
    return std::string(kForward) +
           " This model is a single unit, so that one unit is the whole model: ZeRO-3 saves "
           "parameter memory between visits only, and across units once there are several "
           "(try --layers 3).";
  }
  return std::string(kForward) +
         " Watch the gathered column go up and down: it holds one unit at a time, never two, "
         "never the whole model.";
}
constexpr std::string_view kBackward =
    "The backward pass, last unit first, gathers each unit's parameters again, runs its backward "
    "into a full gradient buffer (grads goes up by one unit), reduce-scatters that into the own "
    "gradient shard as ZeRO-2 does, and frees both buffers.";
constexpr std::string_view kUpdate =
    "AdamW on the own shard (with --bf16: the fp32 master shard, rounded into the parameter\n"
    "shard). No all-gather afterwards: the next step's forward pass gathers each unit when it\n"
    "needs it. Nothing is gathered between steps.";

// kBackward, then where rank 0's rows show the release (a reduce_scatter row is the moment it is
// issued, before the frees): the next gather row's grads are the own shards plus only the new
// unit's full gradient. Said only where the numbers show it.
std::string backward_note(std::span<const Snapshot> backward, std::int64_t own_grads_bytes,
                          const std::vector<UnitLayout>& layout) {
  const auto bytes = [](const Snapshot& s, MemCategory c) { return s.bytes[static_cast<int>(c)]; };
  std::string says(kBackward);
  for (std::size_t i = 1; i < backward.size(); ++i) {
    const Snapshot& row = backward[i];
    if (row.phase != "gather" || backward[i - 1].phase != "reduce_scatter") continue;
    const std::int64_t grads = bytes(row, MemCategory::Grads);
    // Backward sums a unit's full gradient in fp32 in every precision (engines/micro_batch.cpp).
    const std::int64_t unit_bytes = layout[static_cast<std::size_t>(row.unit)].padded_elems * 4;
    if (grads != own_grads_bytes + unit_bytes) break;
    return says + fmt::format(
                      " A reduce_scatter row is the moment it is issued, before the frees; the "
                      "next gather row shows them: at gather u{} grads is {} bytes, the own "
                      "shards' {} plus u{}'s new full fp32 gradient ({}), so u{}'s is gone, and "
                      "gathered holds u{} alone ({} bytes).",
                      row.unit, grouped(grads), grouped(own_grads_bytes), row.unit,
                      grouped(unit_bytes), backward[i - 1].unit, row.unit,
                      grouped(bytes(row, MemCategory::Gathered)));
  }
  return says +
         " The table below, taken once the last reduce_scatter's buffers are freed, shows "
         "grads back at the own shards and nothing gathered.";
}

// The gathered parameters' peak beside the largest unit and the whole model, in words chosen by
// the numbers. A visit computes with the gathered unit as it is kept, in `precision`.
void print_gathered_memory(const TrainResult& result, DType precision) {
  const MemoryLedger& rank0 = result.ranks[0].memory;
  const std::int64_t peak = rank0.peak_bytes(MemCategory::Gathered);
  const auto elem_bytes = static_cast<std::int64_t>(dtype_bytes(precision));
  std::int64_t largest_elems = 0;
  for (const UnitLayout& unit : result.layout) {
    largest_elems = std::max(largest_elems, unit.padded_elems);
  }
  const std::int64_t largest = largest_elems * elem_bytes;
  const std::string unit_words = fmt::format("the largest unit in {}", dtype_name(precision));
  const std::string what =
      peak == largest ? unit_words
                      : fmt::format("{} {}: {} bytes", peak > largest ? "MORE than" : "less than",
                                    unit_words, grouped(largest));
  const std::int64_t whole = total_padded_elems(result.layout) * elem_bytes;
  const std::string beyond =
      peak > whole ? " With so few units one visit takes more than the whole model's parameters: "
                     "the saving grows with the number of units."
                   : "";
  fmt::print("{}\n", wrapped(fmt::format(
                         "Peak of gathered parameters, measured: {} bytes, {}; the whole "
                         "model's {} parameters would be {} bytes.{} After the step: {} bytes "
                         "gathered.",
                         grouped(peak), what, dtype_name(precision), grouped(whole), beyond,
                         grouped(rank0.current_bytes(MemCategory::Gathered)))));
}

// Rank 0's traffic beside DDP's on the same run; true when ZeRO-3's model-state bytes are
// exactly 1.5x DDP's.
bool compare_traffic(const TrainConfig& config, const TrainResult& result) {
  const auto [zero3_bytes, ddp_bytes] = traffic_beside_ddp("ZeRO-3", config, result);
  const bool one_and_a_half = 2 * zero3_bytes == 3 * ddp_bytes;
  fmt::print(
      "\nDDP: one all-reduce of the gradients, 2Ψ(N-1)/N per step. ZeRO-3: an all-gather of the\n"
      "parameters in the forward pass, another in the backward pass, and a reduce-scatter of the\n"
      "gradients: 3Ψ(N-1)/N per step.\n");
  if (ddp_bytes == 0) {
    fmt::print("On one rank neither sends anything: {} and {} bytes.\n\n", zero3_bytes, ddp_bytes);
    return one_and_a_half;
  }
  fmt::print("Measured model-state traffic, ZeRO-3 / DDP = {} / {} = {:.2f}{}\n\n",
             grouped(zero3_bytes), grouped(ddp_bytes),
             static_cast<double>(zero3_bytes) / static_cast<double>(ddp_bytes),
             one_and_a_half ? " (exactly 1.5x)" : " (NOT 1.5x)");
  return one_and_a_half;
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
      argc, argv, "Lesson 04: ZeRO-3 gathers parameters unit by unit", defaults,
      [](const LessonFlags& flags) {
        TrainConfig base;
        base.engine = EngineKind::Zero3;
        const TrainConfig config = sized(base, flags);

        EventRecorder recorder(config.world);
        const TrainResult result = train(config, {}, recorder.observer());
        const StepValues values = step_values(config, result);
        const UnitLayout& first = values.layout.front();
        const UnitValues& first_values = values.units.front();

        heading("Lesson 04: ZeRO-3, gather, run, release");
        print_model(config, result);

        const auto categories =
            with_master(config, std::array{MemCategory::Gathered, MemCategory::Params,
                                           MemCategory::Grads, MemCategory::Optimizer});
        const auto events = recorder.last_step(0, config.steps);
        const std::size_t forward_end = after_last(events, "forward");
        const std::size_t backward_end = after_last(events, "reduce_scatter");
        narrate(flags, recorder, config.steps, {0, forward_end}, categories,
                wrapped(forward_note(result.layout)), true);
        fmt::print("\nBetween steps each rank holds only its shard of {}'s parameters:\n",
                   first.name);
        print_shards("params", first_values.params_before, first, config.world);
        fmt::print(
            "gather {}: the all-gather gives every rank all of them, the same everywhere:\n"
            "  {}\nrelease: the gathered buffer is freed; the shard above stays.\n",
            first.name, slice_text(first_values.params_before, {0, first.padded_elems}));
        const std::string backward = wrapped(
            backward_note(events.subspan(forward_end, backward_end - forward_end),
                          result.ranks[0].memory.current_bytes(MemCategory::Grads), result.layout));
        narrate(flags, recorder, config.steps, {forward_end, backward_end}, categories, backward,
                true, /*settled=*/true);
        fmt::print(
            "\n{}'s reduce-scatter, the last of backward: what each rank sends, what the "
            "owner keeps:\n",
            first.name);
        print_reduce_scatter(first_values, first, config.world);
        narrate(flags, recorder, config.steps, {backward_end, events.size()}, categories, kUpdate);
        fmt::print("\n{}: each rank's own shard, before and after AdamW, and its moments:\n",
                   first.name);
        print_update(first_values, first, config.world);

        pause(flags, "for the gathered memory");
        heading("Gathered memory");
        print_gathered_memory(result, config.features.precision);

        pause(flags, "for the traffic");
        heading("Traffic: the price of sharding parameters");
        const bool one_and_a_half = compare_traffic(config, result);

        pause(flags, "for real scale");
        heading("At real scale");
        print_real_memory(std::array{0, 1, 2, 3});
        fmt::print(
            "\nZeRO-3 divides everything: 16Ψ/N, so 64 GPUs hold a 7B model in under 2 GB each,\n"
            "plus the gathered units of the moment (one block at a time, as above). The price is\n"
            "the 1.5x traffic measured above, the same ratio at any size.\n\n");
        const bool states_ok = check_model_states(config, result);
        fmt::print("\n");
        const bool values_ok = check_values(values, result);
        const bool same = matches_reference(config, result);
        return one_and_a_half && states_ok && values_ok && same ? 0 : 1;
      });
}
