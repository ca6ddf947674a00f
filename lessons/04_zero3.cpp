// 04_zero3.cpp — lesson 04: ZeRO stage 3 shards the parameters too. A unit's full parameters exist
// only while it computes: gather, run, release, in the forward pass and again in the backward pass.
// The price is one more all-gather of the parameters per step: 1.5x DDP's traffic.
#include <fmt/format.h>

#include <array>

#include "lesson_scale.hpp"
#include "lesson_support.hpp"
#include "lesson_values.hpp"

using namespace zl;
using namespace zl::lessons;

namespace {

constexpr std::string_view kForward =
    "Each rank keeps only its shard of everything: parameters, gradients, Adam's moments. To\n"
    "run unit u the engine all-gathers u's parameters into a temporary buffer (gathered), runs\n"
    "it, and frees the buffer before gathering the next unit. Watch the gathered column go up\n"
    "and down: it holds one unit at a time, never two, never the whole model.";
constexpr std::string_view kBackward =
    "The backward pass, last unit first, gathers each unit's parameters again, runs its backward\n"
    "into a full gradient buffer (grads goes up by one unit), reduce-scatters that into the own\n"
    "gradient shard as ZeRO-2 does, and frees both buffers: gathered and grads come back down.";
constexpr std::string_view kUpdate =
    "AdamW on the own shard. No all-gather afterwards: the next step's forward pass gathers each\n"
    "unit when it needs it. Nothing is gathered between steps.";

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
                             .seed = 0};
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

        const std::array categories = {MemCategory::Gathered, MemCategory::Params,
                                       MemCategory::Grads, MemCategory::Optimizer};
        const auto events = recorder.last_step(0, config.steps);
        const std::size_t forward_end = after_last(events, "forward");
        const std::size_t backward_end = after_last(events, "reduce_scatter");
        narrate(flags, recorder, config.steps, {0, forward_end}, categories, kForward, true);
        fmt::print("\nBetween steps each rank holds only its shard of {}'s parameters:\n",
                   first.name);
        print_shards("params", first_values.params_before, first, config.world);
        fmt::print(
            "gather {}: the all-gather gives every rank all of them, the same everywhere:\n"
            "  {}\nrelease: the gathered buffer is freed; the shard above stays.\n",
            first.name, slice_text(first_values.params_before, {0, first.padded_elems}));
        narrate(flags, recorder, config.steps, {forward_end, backward_end}, categories, kBackward,
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
        const MemoryLedger& rank0 = result.ranks[0].memory;
        fmt::print(
            "Peak of gathered parameters, measured: {} bytes, the largest unit; the whole model's\n"
            "parameters would be {} bytes. After the step: {} bytes gathered.\n",
            grouped(rank0.peak_bytes(MemCategory::Gathered)),
            grouped(total_padded_elems(result.layout) * 4),
            grouped(rank0.current_bytes(MemCategory::Gathered)));

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
