// 08_mixed_precision.cpp — training in 16 bits: bf16 and fp16 parameters and gradients with an
// fp32 master copy, and fp16's loss scaling. A forced overflow shows the step every rank skips
// together, and the scale halving until the gradients fit.
#include <fmt/format.h>

#include <array>
#include <cmath>

#include "lesson_support.hpp"

using namespace zl;
using namespace zl::lessons;

namespace {

// The byte split and what the lesson's stage shards of it.
std::string memory_note(int stage) {
  const std::string_view sharded =
      stage == 0   ? "Under DDP nothing is sharded"
      : stage == 1 ? "Under ZeRO-1 the master and the moments are sharded"
      : stage == 2 ? "Under ZeRO-2 the grads, the master and the moments are sharded"
                   : "Under ZeRO-3 all of it is sharded, the parameters too";
  return wrapped(fmt::format(
      "Mixed precision keeps parameters and gradients in 16 bits (2 bytes each) and the optimizer "
      "in fp32: a master copy of the parameters (4 bytes) and Adam's two moments (8). That is the "
      "2 + 2 + 12 = 16 bytes per parameter of the ZeRO paper. {}:",
      sharded));
}
constexpr std::string_view kFormats =
    "bf16 keeps fp32's 8-bit exponent and drops mantissa bits: any fp32 gradient fits. fp16 has a\n"
    "5-bit exponent: values below 6e-8 flush to zero and above 65504 overflow. So fp16 multiplies\n"
    "the loss by a scale (2^16 to start, as DeepSpeed) before backward and divides the gradients\n"
    "by it before the update.";
constexpr std::string_view kOverflow =
    "Now fp16 with a far too large first scale, 2^30: the scaled gradients overflow. The norm\n"
    "(computed the same way, to the same bits, on every rank) is not finite, so every rank skips\n"
    "the step, and the scaler halves the scale (hysteresis 1) until the gradients fit.";

constexpr std::string_view kNonFinite =
    "Why nan and not inf? An fp16 value above 65504 becomes inf. Backward then multiplies and\n"
    "adds those infinities (inf - inf, inf x 0), which gives nan, and one nan makes the norm nan.\n"
    "The scaler does not care which: a norm that is not finite (nan or inf) means overflow.\n\n"
    "Hysteresis: DeepSpeed's fp16.hysteresis (default 2) is how many overflows the scaler takes\n"
    "before it halves. Each overflow is skipped; the first hysteresis - 1 of them only spend the\n"
    "budget, at the same scale. The budget refills only when the scale grows (after\n"
    "loss_scale_window clean steps), not after one clean step. The run above used hysteresis 1,\n"
    "so every overflow halved the scale.\n";

struct Row {
  std::string name;
  TrainResult result;
};

}  // namespace

int main(int argc, char** argv) {
  const LessonSizes defaults{.world = 4,
                             .stage = 2,
                             .mlp = MlpConfig{.layers = 3, .width = 64, .in = 16, .classes = 8},
                             .rows = 16,
                             .steps = 40,
                             .seed = 0};
  return run_lesson(
      argc, argv, "Lesson 08: mixed precision, bf16 and fp16 with loss scaling", defaults,
      [](const LessonFlags& flags) {
        TrainConfig base;
        base.engine = engine_of_stage(*flags.sizes.stage);
        base.adamw.lr = 3e-3;
        const TrainConfig config = sized(base, flags);

        heading("Lesson 08: mixed precision");
        fmt::print("{}\n\n", memory_note(*flags.sizes.stage));
        TrainConfig bf16 = config;
        bf16.features.precision = DType::BF16;
        const TrainResult bf16_run = train(bf16);
        const std::array categories = {MemCategory::Params, MemCategory::Grads, MemCategory::Master,
                                       MemCategory::Optimizer};
        print_ranks(final_holdings(bf16_run), categories);

        pause(flags, "for bf16 against fp16 and fp32");
        heading("Three precisions, one model");
        fmt::print("{}\n\n", kFormats);
        TrainConfig fp16 = config;
        fp16.features.precision = DType::F16;
        std::vector<Row> rows;
        rows.push_back({"fp32", train(config)});
        rows.push_back({"bf16", bf16_run});
        rows.push_back({"fp16", train(fp16)});
        fmt::print("{:<6} {:>12} {:>12} {:>14}\n", "", "first loss", "last loss", "skipped steps");
        for (const Row& row : rows) {
          std::int64_t skipped = 0;
          for (const auto& step : row.result.steps) skipped += step.skipped ? 1 : 0;
          fmt::print("{:<6} {:>12.6f} {:>12.6f} {:>14}\n", row.name, row.result.steps.front().loss,
                     row.result.steps.back().loss, skipped);
        }

        pause(flags, "for a forced overflow");
        heading("fp16 overflows: every rank skips the same steps");
        fmt::print("{}\n\n", kOverflow);
        TrainConfig overflow = fp16;
        overflow.steps = 20;
        overflow.features.loss_scale = {
            .initial_scale_power = 30, .window = 1000, .hysteresis = 1, .min_scale = 1.0};
        const TrainResult overflowed = train(overflow);
        double scale = std::ldexp(1.0, 30);
        std::int64_t skipped = 0;
        for (const auto& step : overflowed.steps) {
          fmt::print("step {:>2}  scale 2^{:<3} grad_norm {:<12} {}\n", step.step + 1,
                     static_cast<int>(std::log2(scale)),
                     std::isnan(step.grad_norm) ? std::string("nan")
                                                : fmt::format("{:.6f}", step.grad_norm),
                     step.skipped ? "skipped on every rank, scale halves" : "updated");
          if (step.skipped) {
            scale = scale / 2.0;
            ++skipped;
          }
        }
        fmt::print("\n{} steps skipped; then the scale settles and training goes on.\n\n{}\n",
                   skipped, kNonFinite);
        TrainConfig patient = overflow;
        patient.features.loss_scale.hysteresis = 2;
        std::int64_t patient_skipped = 0;
        for (const auto& step : train(patient).steps) patient_skipped += step.skipped ? 1 : 0;
        fmt::print(
            "The same run with hysteresis 2 skips {} steps ({} above): the first overflow only\n"
            "spends the budget, so every halving comes one overflow later.\n\n",
            patient_skipped, skipped);

        heading("Checks");
        const bool skips = skipped >= 10 && skipped < overflow.steps;
        fmt::print("{}: the first {} steps overflowed and were skipped, the rest updated\n",
                   skips ? "ok" : "UNEXPECTED", skipped);
        const bool bf16_same = matches_reference(bf16, bf16_run);
        const bool fp16_same = matches_reference(overflow, overflowed);
        return skips && bf16_same && fp16_same ? 0 : 1;
      });
}
