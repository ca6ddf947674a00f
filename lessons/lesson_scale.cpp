// lesson_scale.cpp — the real-scale models and the per-GPU memory table the lessons end with.
#include "lesson_scale.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "lesson_support.hpp"

namespace zl::lessons {

std::vector<RealModel> real_models() {
  return {
      {"GPT-2 124M", gpt_preset("124M"), 0},
      {"GPT-2 1.5B",
       GptConfig{.n_layer = 48, .n_head = 25, .n_embd = 1600, .block_size = 1024, .vocab = 50257},
       0},
      {"7B (bare Ψ)", std::nullopt, 7'000'000'000},
  };
}

StateElems real_elems(const RealModel& model, int world) {
  if (!model.gpt) return state_elems(model.params, world);
  return state_elems(checked_units(*model.gpt), world, real_options());
}

EstimateOptions real_options() {
  return {.precision = DType::BF16};
}

std::string gb_text(std::int64_t bytes) {
  return fmt::format("{:.2f}", static_cast<double>(bytes) / 1e9);
}

double print_real_memory(std::span<const int> stages) {
  double largest_padding_percent = 0.0;
  fmt::print(
      "Per GPU, in bf16 with an fp32 master and Adam (2 + 2 + 4 + 8 bytes per parameter), model\n"
      "states only (estimate.hpp; `zerolab estimate` prints the same; 1 GB = 1e9 bytes):\n\n");
  fmt::print("{:<13}{:>15}{:>5}{:>10}", "model", "Ψ", "W", "padding");
  for (const int stage : stages) {
    fmt::print("{:>13}", stage == 0 ? std::string("DDP GB") : fmt::format("ZeRO-{} GB", stage));
  }
  fmt::print("\n");
  for (const RealModel& model : real_models()) {
    for (const int world : kRealWorlds) {
      const StateElems elems = real_elems(model, world);
      const double padding_percent =
          100.0 * static_cast<double>(elems.padding_elems()) / static_cast<double>(elems.params);
      largest_padding_percent = std::max(largest_padding_percent, padding_percent);
      fmt::print("{:<13}{:>15}{:>5}{:>9.4f}%", model.name, grouped(elems.params), world,
                 padding_percent);
      for (const int stage : stages) {
        fmt::print("{:>13}", gb_text(estimate_ledger(elems, real_options(), stage).total_bytes()));
      }
      fmt::print("\n");
    }
  }
  return largest_padding_percent;
}

}  // namespace zl::lessons
