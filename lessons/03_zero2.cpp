// 03_zero2.cpp — lesson 02's sequel: ZeRO stage 2 shards the gradients too. The trick is timing:
// each unit's gradient is reduce-scattered during backward, as soon as it is complete, and its full
// buffer freed, so the whole gradient never exists on any rank.
#include <fmt/format.h>

#include <algorithm>
#include <array>

#include "core/dtype.hpp"
#include "lesson_scale.hpp"
#include "lesson_support.hpp"
#include "lesson_values.hpp"

using namespace zl;
using namespace zl::lessons;

namespace {

// What the forward rows show, with the bytes each element of a shard costs in `precision`.
std::string forward_note(DType precision) {
  const std::string_view per_element =
      precision == DType::F32
          ? "4 + 8 bytes per element of the shard (gradient, m and v)"
          : "2 + 12 bytes per element of the shard (16-bit gradient, fp32 master, m and v)";
  return fmt::format(
      "Parameters are whole on every rank. Gradients and the optimizer's state exist only as the "
      "own shards: {}. No full gradient exists yet.",
      per_element);
}
constexpr std::string_view kBackward =
    "Backward runs last unit first. As soon as unit u's gradient is complete the engine "
    "reduce-scatters it (average) into the own gradient shard and frees the full buffer. So the "
    "grads column is the own shards plus at most ONE unit's full gradient.";
constexpr std::string_view kUpdate =
    "The last full gradient is gone: only the own shards remain. AdamW on the own shard:\n"
    "parameters (with --bf16: the fp32 master, rounded into them), averaged gradient shard and\n"
    "moments.";
constexpr std::string_view kAllGather =
    "All-gather each unit's parameters, as in ZeRO-1: every rank is whole again.";

// What the grads column of rank 0's backward rows does, in words chosen by its numbers: it
// follows the size of each unit's full (padded) gradient in backward order.
std::string backward_note(std::span<const Snapshot> backward, DType precision) {
  const auto grads = [](const Snapshot& s) {
    return s.bytes[static_cast<int>(MemCategory::Grads)];
  };
  std::string says(kBackward);
  if (precision != DType::F32) {
    says += fmt::format(
        " Under mixed precision that gradient is summed in fp32 (the rows below) and rounded to "
        "{} for the reduce-scatter, both held for that moment.",
        dtype_name(precision));
  }
  for (std::size_t i = 1; i < backward.size(); ++i) {
    if (grads(backward[i]) <= grads(backward[i - 1])) continue;
    return says + fmt::format(
                      " Here it rises, from {} to {} bytes at {} u{}: that unit's full gradient "
                      "is larger than the one before it in backward. The peak is the own shards "
                      "plus the largest unit, wherever it sits.",
                      grouped(grads(backward[i - 1])), grouped(grads(backward[i])),
                      backward[i].phase, backward[i].unit);
  }
  return says +
         " Here each unit's full gradient is no larger than the one before it in "
         "backward, so the column never rises.";
}

// Bytes per element of one unit's full gradient at its peak: backward sums it in fp32, and under
// mixed precision rounds it to 16 bits for the reduction, both held while it is rounded
// (engines/micro_batch.cpp).
std::int64_t unit_gradient_bytes_per_elem(DType precision) {
  return precision == DType::F32 ? 4 : 4 + static_cast<std::int64_t>(dtype_bytes(precision));
}

// The largest unit's full gradient, named for `precision`.
std::string largest_unit_words(DType precision, std::int64_t bytes) {
  if (precision == DType::F32) {
    return fmt::format("the largest unit's full gradient ({} bytes)", grouped(bytes));
  }
  return fmt::format(
      "the largest unit's full gradient twice, in fp32 as backward sums it and in {} as it is "
      "rounded for the reduction ({} bytes together)",
      dtype_name(precision), grouped(bytes));
}

// ZeRO-2's gradient peak beside DDP's, both measured (DDP trained here on the same sizes), in
// words chosen by the numbers.
void print_gradient_memory(const TrainConfig& config, const TrainResult& result) {
  TrainConfig ddp_config = config;
  ddp_config.engine = EngineKind::Ddp;
  const MemoryLedger ddp = train(ddp_config).ranks[0].memory;
  const MemoryLedger& rank0 = result.ranks[0].memory;
  const DType precision = config.features.precision;
  std::int64_t largest_elems = 0;
  for (const UnitLayout& unit : result.layout) {
    largest_elems = std::max(largest_elems, unit.padded_elems);
  }
  const std::int64_t unit_bytes = largest_elems * unit_gradient_bytes_per_elem(precision);
  const std::int64_t ddp_full = ddp.current_bytes(MemCategory::Grads);
  const std::int64_t ddp_peak = ddp.peak_bytes(MemCategory::Grads);
  std::string ddp_says = fmt::format(
      "DDP and ZeRO-1 hold every unit's full gradient through backward: {} bytes per rank",
      grouped(ddp_full));
  if (ddp_peak != ddp_full) {
    ddp_says += fmt::format(
        ", and at DDP's peak, {} bytes, {}", grouped(ddp_peak),
        ddp_peak == ddp_full + largest_elems * 4
            ? "the largest unit's fp32 gradient on top while backward sums it (it is rounded "
              "straight into the unit's full gradient)"
            : fmt::format("{} bytes more than that", grouped(ddp_peak - ddp_full)));
  }
  const std::int64_t peak = rank0.peak_bytes(MemCategory::Grads);
  const std::int64_t own = rank0.current_bytes(MemCategory::Grads);
  const std::string_view compared = peak < ddp_peak    ? "below"
                                    : peak == ddp_peak ? "equal to"
                                                       : "ABOVE";
  const std::string what = peak == own + unit_bytes
                               ? fmt::format("the own shards ({} bytes) plus {}", grouped(own),
                                             largest_unit_words(precision, unit_bytes))
                               : fmt::format("NOT the own shards ({} bytes) plus {}", grouped(own),
                                             largest_unit_words(precision, unit_bytes));
  std::string why;
  if (own >= ddp_full) {
    why = fmt::format(
        " On {} rank(s) the own shards are as large as the whole gradient, so ZeRO-2 saves "
        "nothing here, at the peak or after backward.",
        config.world);
  } else if (peak >= ddp_peak) {
    why = fmt::format(
        " With so few units the largest one is {:.0f}% of the model's gradients, so ZeRO-2 "
        "saves nothing at the peak, only after backward.",
        100.0 * static_cast<double>(largest_elems) /
            static_cast<double>(total_padded_elems(result.layout)));
  }
  fmt::print("{}\n\n",
             wrapped(fmt::format("{}. ZeRO-2's peak, measured: {} bytes, {}; {} DDP's peak. After "
                                 "the step it keeps only the shards: {} bytes.{}",
                                 ddp_says, grouped(peak), what, compared, grouped(own), why)));
}

// Rank 0's traffic beside DDP's on the same run: a reduce-scatter of the gradients plus an
// all-gather of the parameters is an all-reduce's volume. True when the model states match.
bool compare_traffic(const TrainConfig& config, const TrainResult& result) {
  const auto [zero2_bytes, ddp_bytes] = traffic_beside_ddp("ZeRO-2", config, result);
  fmt::print(
      "\nZeRO-2 sends what ZeRO-1 sends: each gradient reduce-scattered once, Ψ(N-1)/N, the\n"
      "parameters all-gathered once, Ψ(N-1)/N: 2Ψ(N-1)/N, an all-reduce's worth. Sharding the\n"
      "gradients changes when they are reduced, not how much is sent. Over {} steps:\n"
      "ZeRO-2 {} bytes, DDP {} bytes: {}.\n\n",
      config.steps, grouped(zero2_bytes), grouped(ddp_bytes),
      zero2_bytes == ddp_bytes ? "the same" : "NOT the same");
  return zero2_bytes == ddp_bytes;
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
      argc, argv, "Lesson 03: ZeRO-2 shards the gradients during backward", defaults,
      [](const LessonFlags& flags) {
        TrainConfig base;
        base.engine = EngineKind::Zero2;
        const TrainConfig config = sized(base, flags);

        EventRecorder recorder(config.world);
        const TrainResult result = train(config, {}, recorder.observer());
        const StepValues values = step_values(config, result);
        const UnitLayout& first = values.layout.front();

        heading("Lesson 03: ZeRO-2, reduce-scatter the gradients during backward");
        print_model(config, result);

        const auto categories =
            with_master(config, std::array{MemCategory::Grads, MemCategory::Params,
                                           MemCategory::Optimizer, MemCategory::Activations});
        const auto events = recorder.last_step(0, config.steps);
        const std::size_t forward_end = after_last(events, "forward");
        const std::size_t backward_end = after_last(events, "reduce_scatter");
        const std::size_t update_end = after_last(events, "update");
        narrate(flags, recorder, config.steps, {0, forward_end}, categories,
                wrapped(forward_note(config.features.precision)));
        const std::string backward = wrapped(backward_note(
            events.subspan(forward_end, backward_end - forward_end), config.features.precision));
        narrate(flags, recorder, config.steps, {forward_end, backward_end}, categories, backward,
                true, /*settled=*/true);
        fmt::print(
            "\n{}'s reduce-scatter, the last of backward: what each rank sends, what the "
            "owner keeps:\n",
            first.name);
        print_reduce_scatter(values.units.front(), first, config.world);
        narrate(flags, recorder, config.steps, {backward_end, update_end}, categories, kUpdate,
                true);
        fmt::print("\n{}: each rank's own shard, before and after AdamW, and its moments:\n",
                   first.name);
        print_update(values.units.front(), first, config.world);
        narrate(flags, recorder, config.steps, {update_end, events.size()}, categories, kAllGather);

        pause(flags, "for the gradient memory");
        heading("Gradient memory");
        print_gradient_memory(config, result);

        pause(flags, "for the traffic");
        heading("Traffic: does sharding the gradients cost communication?");
        const bool same_traffic = compare_traffic(config, result);

        pause(flags, "for real scale");
        heading("At real scale");
        print_real_memory(std::array{0, 1, 2});
        fmt::print(
            "\nZeRO-2 also divides the gradients: 2Ψ + 14Ψ/N tends to 2Ψ, an eighth of DDP, as N\n"
            "grows. The one full unit it holds during backward comes on top: for GPT-2 the "
            "largest\n"
            "is the embeddings unit (wte and wpe: 39.4M parameters in 124M, 82.0M in 1.5B), 79 "
            "and\n"
            "164 MB of bf16 gradient.\n\n");
        const bool states_ok = check_model_states(config, result);
        fmt::print("\n");
        const bool values_ok = check_values(values, result);
        const bool same = matches_reference(config, result);
        return states_ok && values_ok && same && same_traffic ? 0 : 1;
      });
}
