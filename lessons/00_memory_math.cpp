// 00_memory_math.cpp — lesson 00: where 16Ψ comes from, and what each ZeRO stage divides by N.
// The numbers come from engines/estimate.hpp; the lesson ends by checking them against the closed
// forms it explains (16Ψ, 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N, 16Ψ/N for mixed precision).
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <vector>

#include "core/error.hpp"
#include "engines/estimate.hpp"
#include "lesson_scale.hpp"
#include "lesson_support.hpp"

using namespace zl;
using namespace zl::lessons;

namespace {

// An 80 GB GPU, in the lesson's decimal GB.
constexpr std::int64_t kGpuBytes = 80'000'000'000;

std::string gb(std::int64_t bytes) {
  return fmt::format("{:.4g}", static_cast<double>(bytes) / 1e9);
}

// The estimate's table for Ψ on N GPUs, then one stacked bar per stage. The optimizer term K
// is shown as estimate.hpp's ledger view splits it: the fp32 master copy (4 bytes, mixed
// precision only) and Adam's m and v (8 bytes). Returns the paper view's stages.
std::vector<StageEstimate> show_stages(std::int64_t psi, int world, StateDtype dtype) {
  const auto stages =
      estimate_stages({.params = psi,
                       .world = world,
                       .dtype = dtype,
                       .optimizer_bytes_per_param = default_optimizer_bytes_per_param(dtype)});
  const EstimateOptions options{.precision = dtype == StateDtype::Mixed ? DType::BF16 : DType::F32};
  const StateElems elems = state_elems(psi, world);
  fmt::print("Ψ = {} on N = {} GPUs, {}, per GPU (1 GB = 1e9 bytes):\n", grouped(psi), world,
             dtype_name(dtype));
  fmt::print("{:<10}{:>11}{:>11}{:>11}{:>11}{:>11}   {}\n", "stage", "params GB", "grads GB",
             "master GB", "Adam GB", "total GB", "formula");
  std::vector<CategoryBytes> bars;
  for (const auto& s : stages) {
    const LedgerEstimate ledger = estimate_ledger(elems, options, s.stage);
    ZL_CHECK(ledger.total_bytes() == s.total_bytes() &&
                 ledger.master_bytes + ledger.optimizer_bytes == s.optimizer_bytes,
             "estimate.hpp's two views disagree at stage {}", s.stage);
    fmt::print("{:<10}{:>11}{:>11}{:>11}{:>11}{:>11}   {}\n",
               s.stage == 0 ? "0 (DDP)" : fmt::format("{}", s.stage), gb(s.params_bytes),
               gb(s.grads_bytes), gb(ledger.master_bytes), gb(ledger.optimizer_bytes),
               gb(s.total_bytes()), s.formula);
    CategoryBytes bytes{};
    bytes[static_cast<std::size_t>(MemCategory::Params)] = s.params_bytes;
    bytes[static_cast<std::size_t>(MemCategory::Grads)] = s.grads_bytes;
    bytes[static_cast<std::size_t>(MemCategory::Master)] = ledger.master_bytes;
    bytes[static_cast<std::size_t>(MemCategory::Optimizer)] = ledger.optimizer_bytes;
    bars.push_back(bytes);
  }
  fmt::print("\n");
  const std::array categories = {MemCategory::Params, MemCategory::Grads, MemCategory::Master,
                                 MemCategory::Optimizer};
  print_bars(bars, categories, 0, "stage");
  return stages;
}

// One line of a parameter count: a tensor (or group), its shape, its elements.
struct ParamRow {
  std::string_view name;
  std::string_view shape;
  std::int64_t params;
};

// Prints the rows and their sum; returns the sum.
template <std::size_t N>
std::int64_t print_param_rows(const std::array<ParamRow, N>& rows) {
  std::int64_t total = 0;
  for (const auto& row : rows) {
    fmt::print("  {:<13}{:<40}{:>13}\n", row.name, row.shape, grouped(row.params));
    total += row.params;
  }
  fmt::print("  {:<53}{:>13}\n", "total", grouped(total));
  return total;
}

// True when the stages' totals are `bytes`, stage 0 to 3.
bool totals_are(const std::vector<StageEstimate>& stages,
                const std::array<std::int64_t, 4>& bytes) {
  return std::ranges::equal(stages, bytes, {}, &StageEstimate::total_bytes);
}

// numerator / denominator with two decimals, rounded: "2,333,333,333.33".
std::string quotient_text(std::int64_t numerator, std::int64_t denominator) {
  const std::int64_t hundredths = (100 * numerator + denominator / 2) / denominator;
  return fmt::format("{}.{:02d}", grouped(hundredths / 100), hundredths % 100);
}

// DDP's model states per GPU and ZeRO-3's share of them: 1/N when N divides Ψ, a little more
// when each GPU holds ceil(Ψ/N) elements of each state.
std::string zero3_share(const std::vector<StageEstimate>& stages, std::int64_t params, int world) {
  const std::int64_t ddp = stages[0].total_bytes(), zero3 = stages[3].total_bytes();
  const std::int64_t shard = shard_elems(params, world);
  const std::string share =
      ddp == zero3 * world
          ? fmt::format("1/{} of DDP", world)
          : fmt::format(
                "a little more than 1/{} of DDP: each GPU holds ceil(Ψ/N) = {} elements "
                "of each state, where Ψ/N = {}",
                world, grouped(shard), quotient_text(params, world));
  return fmt::format("For model states alone DDP needs {} GB per GPU{}; ZeRO-3 needs {}.", gb(ddp),
                     ddp > kGpuBytes ? ", more than an 80 GB GPU holds" : "", share);
}

// The check's verdict on the tables, with what Ψ/N means where N does not divide Ψ: a GPU holds
// whole elements, ceil(Ψ/N) of each state, so a sharded term is a few bytes over the exact form.
std::string closed_forms_verdict(bool forms,
                                 std::initializer_list<std::array<std::int64_t, 2>> psis,
                                 int world) {
  const std::string verdict = fmt::format(
      "Every table above {} the closed forms 16Ψ, 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N, 16Ψ/N (mixed) and 16Ψ, "
      "8Ψ + 8Ψ/N, 4Ψ + 12Ψ/N, 16Ψ/N (fp32)",
      forms ? "matches" : "does NOT match");
  std::string rounded;
  for (const auto& [params, shard] : psis) {
    if (shard * world == params) continue;
    rounded += fmt::format(
        "{}for Ψ = {}, Ψ/N is {} elements, so 16Ψ/N is {} bytes where 16 x {} / {} = {}",
        rounded.empty() ? "" : "; ", grouped(params), grouped(shard), grouped(16 * shard),
        grouped(params), world, quotient_text(16 * params, world));
  }
  if (rounded.empty()) return verdict + ", N dividing every Ψ exactly.";
  return verdict + ", with Ψ/N read as whole elements per GPU, ceil(Ψ/N): " + rounded + ".";
}

// GPT-2 small's parameters counted tensor by tensor, printed; returns Ψ.
std::int64_t count_gpt2_small() {
  // GPT-2 small (Hugging Face "gpt2"): n_layer 12, n_embd 768, vocab 50257, context 1024.
  constexpr std::int64_t kLayers = 12, kEmbd = 768, kVocab = 50257, kContext = 1024;
  const std::array<ParamRow, 6> block_rows = {{
      {"ln_1", "weight, bias: 2 x 768", 2 * kEmbd},
      {"attn.c_attn", "768 x 2304 + 2304 (q, k, v)", kEmbd * 3 * kEmbd + 3 * kEmbd},
      {"attn.c_proj", "768 x 768 + 768", kEmbd * kEmbd + kEmbd},
      {"ln_2", "2 x 768", 2 * kEmbd},
      {"mlp.c_fc", "768 x 3072 + 3072", kEmbd * 4 * kEmbd + 4 * kEmbd},
      {"mlp.c_proj", "3072 x 768 + 768", 4 * kEmbd * kEmbd + kEmbd},
  }};
  fmt::print("One transformer block:\n");
  const std::int64_t block = print_param_rows(block_rows);
  const std::array<ParamRow, 5> model_rows = {{
      {"wte", "token embeddings, 50257 x 768", kVocab * kEmbd},
      {"wpe", "position embeddings, 1024 x 768", kContext * kEmbd},
      {"h.0 .. h.11", "12 blocks as above", kLayers * block},
      {"ln_f", "2 x 768", 2 * kEmbd},
      {"lm_head", "tied to wte: no parameters of its own", 0},
  }};
  fmt::print("\nThe model:\n");
  const std::int64_t psi = print_param_rows(model_rows);
  fmt::print(
      "(zerolab, like llm.c and nanoGPT, pads the vocabulary to 50304 rows in memory for "
      "speed:\n"
      "36,096 zero parameters more, in the ledgers' bytes but in no file; nanoGPT prints "
      "123.69M\n"
      "because it leaves out the position embeddings.)\n\n");
  return psi;
}

}  // namespace

int main(int argc, char** argv) {
  const LessonSizes defaults{.world = 8, .params = 7'000'000'000};
  return run_lesson(
      argc, argv, "Lesson 00: the memory math of ZeRO", defaults, [](const LessonFlags& flags) {
        heading("Lesson 00: where 16Ψ comes from");
        const int half = param_bytes_per_param(StateDtype::Mixed);
        const int k = default_optimizer_bytes_per_param(StateDtype::Mixed);
        fmt::print(
            "Mixed-precision training with Adam keeps, for each of the model's Ψ parameters:\n"
            "  fp16 parameter                        {:>2} bytes\n"
            "  fp16 gradient                         {:>2} bytes\n"
            "  fp32 master copy, Adam's m and v      {:>2} bytes (K: 4 + 4 + 4)\n"
            "  total                                 {:>2} bytes: 2Ψ + 2Ψ + 12Ψ = 16Ψ\n"
            "In fp32 there is no master copy (the parameters are fp32 already): 4 + 4 + 8 = 16 "
            "bytes\n"
            "too, split differently. The engines of lessons 01-04 train in fp32. The articles\n"
            "differ for the same reason: 003 counts fp32 (its code's 4 bytes per tensor); 000,\n"
            "001 and 004 count mixed precision, 000 with the fp32 master apart from Adam's 8\n"
            "bytes, 001 and 004 with it inside the optimizer's K = 12.\n"
            "ZeRO shards these terms over the N data-parallel GPUs: stage 1 the optimizer state,\n"
            "stage 2 also the gradients, stage 3 also the parameters.\n",
            half, grad_bytes_per_param(StateDtype::Mixed), k,
            half + grad_bytes_per_param(StateDtype::Mixed) + k);

        const std::int64_t p = *flags.sizes.params;
        const int world = *flags.sizes.world;
        const std::string model = fmt::format("A {}-parameter model on {} GPUs", grouped(p), world);
        pause(flags, "for " + model);
        heading(model);
        const auto mixed_model = show_stages(p, world, StateDtype::Mixed);
        fmt::print("\n{}\n\n", wrapped(zero3_share(mixed_model, p, world)));
        const auto fp32_model = show_stages(p, world, StateDtype::Fp32);
        fmt::print(
            "\nSame 16Ψ for DDP and ZeRO-3, but in fp32 there is no master copy: the optimizer\n"
            "is Adam's 8 of the 16 bytes, not 12, so sharding it alone (stage 1) saves less.\n");

        pause(flags, "for nanoGPT's GPT-2 small");
        heading("nanoGPT's GPT-2 small (124M)");
        const std::int64_t psi = count_gpt2_small();
        const auto mixed_124m = show_stages(psi, world, StateDtype::Mixed);
        fmt::print(
            "\nAt this size the model states fit on any one GPU; ZeRO matters for models in the "
            "billions.\n");

        pause(flags, "for real scale");
        heading("Real models on 8 and 64 GPUs");
        const double padding_percent = print_real_memory(std::array{0, 1, 2, 3});
        fmt::print("\n{}\n\n", wrapped(fmt::format(
                                   "The GPT rows count the models' units padded as the engines pad "
                                   "them (a multiple of W·64 elements each): at most {:.4f}% of Ψ. "
                                   "The 7B row is a bare Ψ.",
                                   padding_percent)));
        pause(flags, "for the check");
        heading("Check against the closed forms");
        // The closed forms with Ψ/N a shard: ceil(Ψ/N) when N does not divide Ψ. Mixed: 16Ψ,
        // 4Ψ + 12Ψ/N, 2Ψ + 14Ψ/N, 16Ψ/N; fp32: 16Ψ, 8Ψ + 8Ψ/N, 4Ψ + 12Ψ/N, 16Ψ/N.
        const std::int64_t s = shard_elems(p, world), s124m = shard_elems(psi, world);
        const bool forms =
            totals_are(mixed_model, {16 * p, 4 * p + 12 * s, 2 * p + 14 * s, 16 * s}) &&
            totals_are(fp32_model, {16 * p, 8 * p + 8 * s, 4 * p + 12 * s, 16 * s}) &&
            totals_are(mixed_124m,
                       {16 * psi, 4 * psi + 12 * s124m, 2 * psi + 14 * s124m, 16 * s124m});
        // 7B on 8 GPUs by hand (16 x 7, 4 x 7 + 12 x 7 / 8, ...): held to at the default sizes.
        const bool paper =
            !flags.defaults || totals_are(mixed_model, {112'000'000'000, 38'500'000'000,
                                                        26'250'000'000, 14'000'000'000});
        fmt::print("Ψ = {} on {} GPUs, mixed, per GPU: {} / {} / {} / {} GB{}\n", grouped(p), world,
                   gb(mixed_model[0].total_bytes()), gb(mixed_model[1].total_bytes()),
                   gb(mixed_model[2].total_bytes()), gb(mixed_model[3].total_bytes()),
                   !flags.defaults ? ""
                   : paper         ? ", the expected 112 / 38.5 / 26.25 / 14"
                                   : ", NOT the expected 112 / 38.5 / 26.25 / 14");
        fmt::print(
            "GPT-2 small: Ψ = {}, {}\n", grouped(psi),
            psi == 124'439'808 ? "the published 124,439,808" : "NOT the published 124,439,808");
        fmt::print("{}\n", wrapped(closed_forms_verdict(forms, {{p, s}, {psi, s124m}}, world)));
        return paper && forms && psi == 124'439'808 ? 0 : 1;
      });
}
