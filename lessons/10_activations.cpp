// 10_activations.cpp — lesson 10: the memory ZeRO does not shard. A GPT's activations, measured
// by kind in the ledger beside what estimate_activations predicts; why ZeRO-1 saves little of a
// step's peak; 16-bit activations under bf16 as autocast keeps them; activation checkpointing
// (full, every:K, selective) trading memory for a second
// forward with the same bits; attention that keeps two floats per row instead of T x T
// probabilities, so activations grow linearly in T; then GPT-2 124M at the ZeRO-1 article's
// micro-batch. Every number is the library's: train()'s ledgers and estimate's formulas.
#include <fmt/format.h>

#include <array>
#include <string>

#include "engines/estimate.hpp"
#include "engines/estimate_activations.hpp"
#include "lesson_support.hpp"
#include "run/compare.hpp"

using namespace zl;
using namespace zl::lessons;

namespace {

constexpr std::string_view kWhy =
    "ZeRO shards model states: parameters, gradients, the optimizer. Every rank still runs a\n"
    "whole micro-batch through the whole model, and backward needs what forward computed: each\n"
    "block's LayerNorm outputs, qkv, the MLP's hidden values, the logits. Those activations\n"
    "belong to the rank's own samples, so no stage can divide them by N.";
constexpr std::string_view kCheckpointing =
    "Activation checkpointing keeps less and computes it again. `full` keeps only each block's\n"
    "output (the next block's input) and reruns the block's forward at the start of its\n"
    "backward; `every:2` does that for blocks 0, 2, ...; `selective` keeps the matrix products'\n"
    "outputs and reruns only the cheap parts (LayerNorms, attention's softmax, GELU). The rerun\n"
    "uses the same kernels, inputs and parameters, so the trained parameters are the same bits.";
constexpr std::string_view kSixteenBits =
    "Under bf16 (or fp16) a matrix product's inputs and outputs are kept in 16 bits, as\n"
    "torch.autocast keeps them: the LayerNorm outputs, qkv, attention's output, the MLP's hidden\n"
    "values, the logits and their gradient. The residual stream, the LayerNorm and attention\n"
    "statistics and the loss stay fp32. The kernels read and write the 16-bit tensors as they\n"
    "are kept and compute in fp32, and the LM head and the loss run 512 token rows at a time.";
constexpr std::string_view kAttention =
    "Attention's probabilities are B x heads x T x T per block: kept, they grow with T². zerolab\n"
    "keeps two floats per query row instead (the row's largest score and its sum of\n"
    "exponentials) and rebuilds the probabilities in backward, exactly as forward made them.";

// Peak activation bytes of rank 0.
std::int64_t peak_activations(const TrainResult& result) {
  return result.ranks[0].memory.peak_bytes(MemCategory::Activations);
}

// Rank 0's model-state bytes after the run.
std::int64_t states_of(const TrainResult& result) {
  return result.ranks[0].memory.model_state_bytes();
}

// Rank 0's model states after the step (params, grads, master, optimizer) and its activations'
// peak, with the activations' share of the two.
void print_share(std::string_view name, const TrainResult& result) {
  const std::int64_t states = states_of(result);
  const std::int64_t activations = peak_activations(result);
  fmt::print("{:<8} model states {:>10} B   activations {:>10} B   activations' share {:>5.1f}%\n",
             name, grouped(states), grouped(activations),
             100.0 * static_cast<double>(activations) / static_cast<double>(states + activations));
}

// How much ZeRO-1 takes off the model states and off states plus activations, in words chosen
// by the two runs' numbers.
std::string peak_note(const TrainResult& ddp, const TrainResult& zero1) {
  const std::int64_t states_before = states_of(ddp), states_after = states_of(zero1);
  const std::int64_t total_before = states_before + peak_activations(ddp);
  const std::int64_t total_after = states_after + peak_activations(zero1);
  if (states_after >= states_before) {
    return "ZeRO-1 shards nothing on one rank: the model states and the activations stay.";
  }
  const double states_fall = 100.0 * static_cast<double>(states_before - states_after) /
                             static_cast<double>(states_before);
  const double total_fall =
      100.0 * static_cast<double>(total_before - total_after) / static_cast<double>(total_before);
  return wrapped(fmt::format(
      "ZeRO-1 divides the optimizer state by N: the model states fall by {:.1f}%. The activations "
      "do not move, so states plus activations fall by {:.1f}%, {} as much.",
      states_fall, total_fall, total_fall < states_fall / 2.0 ? "less than half" : "not quite"));
}

// The ledger's activations at their peak beside the estimate, kind by kind; true when all agree.
bool print_kinds(const TrainResult& result, const ActivationEstimate& estimate) {
  bool equal = true;
  fmt::print("{:<12}{:>14}{:>14}\n", "kind", "ledger B", "estimate B");
  for (int k = 0; k < kActivationKindCount; ++k) {
    const auto kind = static_cast<ActivationKind>(k);
    const std::int64_t measured = result.ranks[0].memory.activation_bytes_at_peak(kind);
    if (measured == 0 && estimate.bytes_of(kind) == 0) continue;
    equal = equal && measured == estimate.bytes_of(kind);
    fmt::print("{:<12}{:>14}{:>14}\n", activation_kind_name(kind), grouped(measured),
               grouped(estimate.bytes_of(kind)));
  }
  fmt::print("{:<12}{:>14}{:>14}   {}\n", "total", grouped(peak_activations(result)),
             grouped(estimate.total_bytes()), estimate.formula);
  return equal && peak_activations(result) == estimate.total_bytes();
}

ActivationEstimate estimate_of(const TrainConfig& config) {
  return estimate_activations(config.gpt, config.micro_batch, config.gpt.block_size,
                              config.activations, config.features.precision);
}

// The same DDP run with fp32 activations beside the bf16 one; `estimates` turns false if the
// fp32 run's ledger differs from its estimate.
void show_sixteen_bits(const TrainConfig& bf16, const TrainResult& bf16_run, bool& estimates) {
  TrainConfig fp32 = bf16;
  fp32.features.precision = DType::F32;
  const TrainResult fp32_run = train(fp32);
  const ActivationEstimate fp32_estimate = estimate_of(fp32);
  estimates = estimates && peak_activations(fp32_run) == fp32_estimate.total_bytes();
  fmt::print("{}\n\n", kSixteenBits);
  fmt::print("fp32 activations {:>12} B   {}\n", grouped(peak_activations(fp32_run)),
             fp32_estimate.formula);
  fmt::print("bf16 activations {:>12} B   {:.0f}% of fp32\n", grouped(peak_activations(bf16_run)),
             100.0 * static_cast<double>(peak_activations(bf16_run)) /
                 static_cast<double>(peak_activations(fp32_run)));
  const GptConfig gpt2 = gpt_preset("124M");
  const auto gpt2_bytes = [&](DType dtype) {
    return static_cast<double>(
        estimate_activations(gpt2, 12, gpt2.block_size, {}, dtype).total_bytes());
  };
  const double toy_percent = 100.0 * static_cast<double>(peak_activations(bf16_run)) /
                             static_cast<double>(peak_activations(fp32_run));
  const double gpt2_percent = 100.0 * gpt2_bytes(DType::BF16) / gpt2_bytes(DType::F32);
  fmt::print(
      "GPT-2 124M's 12 blocks at 12 x 1024 keep {:.0f}% of their fp32 activations in bf16\n"
      "(estimate), {} this toy of {} blocks: what stays fp32 (the residual stream, the\n"
      "statistics, the gradient scratch) is a {} share there.\n",
      gpt2_percent,
      gpt2_percent < toy_percent ? "less than" : (gpt2_percent > toy_percent ? "more than" : "as"),
      bf16.gpt.n_layer,
      gpt2_percent < toy_percent ? "smaller" : (gpt2_percent > toy_percent ? "larger" : "equal"));
}

// Every policy on the ZeRO-1 run: its activations against none's, and its parameters against the
// run without checkpointing. `estimates` and `same_bits` turn false at the first disagreement.
void show_checkpointing(const TrainConfig& zero1, const TrainResult& sharded, bool& estimates,
                        bool& same_bits) {
  fmt::print("{}\n\n", kCheckpointing);
  fmt::print("{:<11}{:>16}{:>10}   {}\n", "policy", "activations B", "of none",
             "parameters after training");
  for (const char* policy : {"none", "selective", "every:2", "full"}) {
    TrainConfig checkpointed = zero1;
    checkpointed.activations = parse_activation_policy(policy);
    const TrainResult result = train(checkpointed);
    const auto diff = first_difference(result, sharded);
    same_bits = same_bits && !diff;
    estimates = estimates && peak_activations(result) == estimate_of(checkpointed).total_bytes();
    fmt::print("{:<11}{:>16}{:>9.0f}%   {}\n", policy, grouped(peak_activations(result)),
               100.0 * static_cast<double>(peak_activations(result)) /
                   static_cast<double>(peak_activations(sharded)),
               diff ? *diff : "the same bits as without checkpointing");
  }
}

// The ZeRO-1 run at T = 8, 16, 32 beside what kept probabilities would add; true when each
// doubling of T exactly doubles the activations.
bool show_context(const TrainConfig& zero1) {
  fmt::print("{}\n\n", kAttention);
  fmt::print("{:>4}{:>16}{:>26}\n", "T", "activations B", "probabilities would be B");
  bool linear = true;
  std::int64_t previous = 0;
  for (const std::int64_t T : {8, 16, 32}) {
    TrainConfig context = zero1;
    context.gpt.block_size = T;
    const std::int64_t bytes = peak_activations(train(context));
    const std::int64_t probabilities =
        context.gpt.n_layer * 4 * context.micro_batch * context.gpt.n_head * T * T;
    linear = linear && (previous == 0 || bytes == 2 * previous);
    fmt::print("{:>4}{:>16}{:>26}\n", T, grouped(bytes), grouped(probabilities));
    previous = bytes;
  }
  fmt::print("Each doubling of T doubles the activations; kept probabilities would grow 4x.\n");
  return linear;
}

// GPT-2 124M at the ZeRO-1 article's micro-batch on 8 GPUs: ZeRO-1's model states plus each
// policy's activations, from the estimate.
void show_real_scale() {
  const GptConfig gpt2 = gpt_preset("124M");
  const EstimateOptions options{.precision = DType::BF16};
  const StateElems elems = state_elems(checked_units(gpt2), 8, options);
  const std::int64_t zero1_states = estimate_ledger(elems, options, 1).total_bytes();
  fmt::print("ZeRO-1 model states {:.2f} GB per GPU; with each policy's activations:\n",
             static_cast<double>(zero1_states) / 1e9);
  for (const char* policy : {"none", "selective", "every:4", "full"}) {
    const ActivationEstimate a = estimate_activations(
        gpt2, 12, gpt2.block_size, parse_activation_policy(policy), options.precision);
    fmt::print("  {:<10} activations {:>6.2f} GB   total {:>6.2f} GB of an 80 GB GPU\n", policy,
               static_cast<double>(a.total_bytes()) / 1e9,
               static_cast<double>(a.total_bytes() + zero1_states) / 1e9);
  }
  fmt::print(
      "The ZeRO-1 article measured 12.34 GB unsharded and 11.15 GB with ZeRO-1 for this run\n"
      "in nanoGPT: most of it activations, as here (docs/memory-math.md compares them).\n");
}

}  // namespace

int main(int argc, char** argv) {
  // GPT small holds 3,495,936 bytes of bf16 activations for 8 rows, about 440 KB a row (680 KB
  // in fp32); --rows is sized at 600 KB a row.
  const LessonSizes defaults{.world = 2, .rows = 8, .steps = 2, .seed = 5, .row_bytes = 600'000};
  return run_lesson(
      argc, argv, "Lesson 10: activations, the memory ZeRO does not shard", defaults,
      [](const LessonFlags& flags) {
        TrainConfig base;
        base.model = ModelKind::Gpt;
        base.gpt = gpt_preset("small");  // 4 blocks, 4 heads, 64 channels, T 32, vocabulary 128
        base.engine = EngineKind::Ddp;
        base.features.precision = DType::BF16;
        const TrainConfig config = sized(base, flags);

        heading("Lesson 10: activations, the memory ZeRO does not shard");
        fmt::print("{}\n\n", kWhy);
        const TrainResult ddp = train(config);
        TrainConfig zero1 = config;
        zero1.engine = EngineKind::Zero1;
        const TrainResult sharded = train(zero1);
        fmt::print(
            "GPT small, B = {} sequences of T = {} tokens per rank, W = {}, bf16 (rank 0):\n",
            config.micro_batch, config.gpt.block_size, config.world);
        print_share("DDP", ddp);
        print_share("ZeRO-1", sharded);
        fmt::print("{}\n", peak_note(ddp, sharded));

        pause(flags, "for the activations by kind");
        heading("What the activations are, measured and estimated");
        bool estimates = print_kinds(ddp, estimate_of(config));
        bool same_bits = true;

        pause(flags, "for 16-bit activations");
        heading("Activations in 16 bits");
        show_sixteen_bits(config, ddp, estimates);

        pause(flags, "for activation checkpointing");
        heading("Activation checkpointing: keep less, compute again");
        show_checkpointing(zero1, sharded, estimates, same_bits);

        pause(flags, "for attention and the context length");
        heading("Attention without its T x T probabilities");
        const bool linear = show_context(zero1);

        pause(flags, "for real scale");
        heading("GPT-2 124M at micro-batch 12 x 1024 on 8 GPUs, bf16 (zerolab estimate)");
        show_real_scale();

        heading("Checks");
        fmt::print("{}: every estimate equals the ledger, kind by kind and for every policy\n",
                   estimates ? "ok" : "MISMATCH");
        fmt::print("{}: every checkpointing policy trains the same bits as none\n",
                   same_bits ? "ok" : "DIFFERENT");
        fmt::print("{}: each doubling of T doubles the activations\n",
                   linear ? "ok" : "NOT LINEAR");
        return estimates && same_bits && linear ? 0 : 1;
      });
}
