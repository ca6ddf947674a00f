// estimate_cli_test.cpp — runs `zerolab estimate`: the 7B tables as printed in fp32 and mixed
// precision, the JSON form, accumulation, GPT-2 small with its padding and persistence, the MLP,
// the states offloaded to host memory and NVMe, the memory wall, and every bad flag failing with
// exactly one line on stderr and exit code 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "support/command.hpp"
#include "support/test_paths.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;

CommandResult zerolab(const std::string& args) {
  return run_command(std::string(zl::test::zerolab_binary()) + " " + args);
}

// Whitespace-separated fields of the table row (below the "stage" header) that starts with
// `stage` ("0 (DDP)", "1", ...).
std::vector<std::string> row(const std::string& out, const std::string& stage) {
  std::istringstream lines(out);
  std::string line;
  while (std::getline(lines, line) && line.rfind("stage ", 0) != 0) {
  }
  while (std::getline(lines, line)) {
    if (line.rfind(stage + " ", 0) != 0) continue;
    std::istringstream words(line.substr(stage.size()));
    std::vector<std::string> fields;
    for (std::string word; words >> word;) fields.push_back(word);
    return fields;
  }
  return {};
}

// Fields after the stage: params_GB grads_GB master_GB optimizer_GB total_GB total_bytes
// unpadded_bytes extra_bytes formula...
void expect_row(const std::string& out, const std::string& stage,
                const std::vector<std::string>& gb) {
  const auto fields = row(out, stage);
  ASSERT_GE(fields.size(), 8u) << "no row for stage " << stage << " in\n" << out;
  EXPECT_EQ(std::vector<std::string>(fields.begin(), fields.begin() + 5), gb) << out;
}

// total_bytes, unpadded_bytes and extra_bytes of a row.
void expect_bytes(const std::string& out, const std::string& stage,
                  const std::vector<std::string>& bytes) {
  const auto fields = row(out, stage);
  ASSERT_GE(fields.size(), 8u) << "no row for stage " << stage << " in\n" << out;
  EXPECT_EQ(std::vector<std::string>(fields.begin() + 5, fields.begin() + 8), bytes) << out;
}

bool has(const std::string& out, const std::string& text) {
  return out.find(text) != std::string::npos;
}

// DeepSpeed's mixed precision is the default: 2Ψ + 2Ψ + 4Ψ + 8Ψ.
TEST(EstimateCli, Mixed7BTable) {
  const auto run = zerolab("estimate --params 7e9 --world 8");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(run.err, "");
  expect_row(run.out, "0 (DDP)", {"14", "14", "28", "56", "112"});
  expect_row(run.out, "1", {"14", "14", "3.5", "7", "38.5"});
  expect_row(run.out, "2", {"14", "1.75", "3.5", "7", "26.25"});
  expect_row(run.out, "3", {"1.75", "1.75", "3.5", "7", "14"});
  expect_bytes(run.out, "0 (DDP)", {"112000000000", "112000000000", "0"});
  EXPECT_TRUE(has(run.out, "1 GB = 1e9 bytes")) << run.out;
  EXPECT_TRUE(has(run.out, "ceil(Ψ/N) = 875000000")) << run.out;
  EXPECT_TRUE(has(run.out, "precision bf16")) << run.out;
  EXPECT_TRUE(has(run.out, "2Ψ + 2Ψ + 4Ψ/N + 8Ψ/N = 4Ψ + 12Ψ/N")) << run.out;
  EXPECT_TRUE(has(run.out, "2Ψ + 2Ψ/N + 4Ψ/N + 8Ψ/N = 2Ψ + 14Ψ/N")) << run.out;
}

TEST(EstimateCli, PrecisionSpellingsAgree) {
  const auto bf16 = zerolab("estimate --params 7e9 --world 8 --precision bf16");
  ASSERT_EQ(bf16.exit_code, 0) << bf16.err;
  EXPECT_EQ(zerolab("estimate --params 7e9 --world 8").out, bf16.out);
  EXPECT_EQ(zerolab("estimate --params 7e9 --world 8 --bf16").out, bf16.out);
  EXPECT_EQ(zerolab("estimate --params 7e9 --world 8 --dtype mixed").out, bf16.out);
  const auto fp32 = zerolab("estimate --params 7e9 --world 8 --precision fp32");
  EXPECT_EQ(zerolab("estimate --params 7e9 --world 8 --dtype fp32").out, fp32.out);
  // fp16 takes bf16's bytes.
  const auto fp16 = zerolab("estimate --params 7e9 --world 8 --fp16");
  ASSERT_EQ(fp16.exit_code, 0) << fp16.err;
  EXPECT_TRUE(has(fp16.out, "precision fp16")) << fp16.out;
  for (const std::string stage : {"0 (DDP)", "1", "2", "3"})
    EXPECT_EQ(row(fp16.out, stage), row(bf16.out, stage));
}

TEST(EstimateCli, Fp327BTable) {
  const auto run = zerolab("estimate --params 7000000000 --world 8 --precision fp32");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  expect_row(run.out, "0 (DDP)", {"28", "28", "0", "56", "112"});
  expect_row(run.out, "1", {"28", "28", "0", "7", "63"});
  expect_row(run.out, "2", {"28", "3.5", "0", "7", "38.5"});
  expect_row(run.out, "3", {"3.5", "3.5", "0", "7", "14"});
  EXPECT_TRUE(has(run.out, "4Ψ/N + 4Ψ/N + 8Ψ/N = 16Ψ/N")) << run.out;
}

TEST(EstimateCli, JsonHasEveryStageInBytes) {
  const auto run = zerolab("estimate --params 7e9 --world 8 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json.at("params").get<std::int64_t>(), 7'000'000'000);
  EXPECT_EQ(json.at("world").get<int>(), 8);
  EXPECT_EQ(json.at("precision").get<std::string>(), "bf16");
  EXPECT_TRUE(json.at("model").is_null());
  EXPECT_TRUE(json.at("persistence_threshold_elems").is_null());
  EXPECT_EQ(json.at("padding_elems").get<std::int64_t>(), 0);
  EXPECT_EQ(json.at("shard_elems").get<std::int64_t>(), 875'000'000);
  EXPECT_EQ(json.at("master_bytes_per_param").get<int>(), 4);
  EXPECT_EQ(json.at("optimizer_bytes_per_param").get<int>(), 8);
  const auto& stages = json.at("stages");
  ASSERT_EQ(stages.size(), 4u);
  const std::int64_t totals[] = {112'000'000'000, 38'500'000'000, 26'250'000'000, 14'000'000'000};
  for (int s = 0; s < 4; ++s) {
    EXPECT_EQ(stages[s].at("stage").get<int>(), s);
    EXPECT_EQ(stages[s].at("total_bytes").get<std::int64_t>(), totals[s]);
    EXPECT_EQ(stages[s].at("unpadded_total_bytes").get<std::int64_t>(), totals[s]);
    EXPECT_EQ(stages[s].at("params_bytes").get<std::int64_t>() +
                  stages[s].at("grads_bytes").get<std::int64_t>() +
                  stages[s].at("master_bytes").get<std::int64_t>() +
                  stages[s].at("optimizer_bytes").get<std::int64_t>(),
              totals[s]);
  }
  EXPECT_EQ(stages[2].at("grads_bytes").get<std::int64_t>(), 1'750'000'000);
  EXPECT_EQ(stages[3].at("total_formula").get<std::string>(), "16Ψ/N");
}

// GPT-2 124M at micro-batch 12 x 1024 (the ZeRO-1 article's run), bf16 (estimate's default), by
// hand with N = BT = 12288: inputs 16N + 4NC; per block 2·6NC (ln_1, qkv, attention's output,
// ln_2 in 16 bits) + 4·2NC (the residual sums) + 4·4N (LayerNorm statistics) + 4·2BHT
// (attention's two stats per row and head) + 2·8NC (MLP hidden, 16 bits); logits 2NC + 8N + 2NVp
// (Vp = 50,304, the padded vocabulary), their gradient written over them; scratch 56NC. No fp32
// copy of any 16-bit tensor: the kernels read and write them as kept.
TEST(EstimateCli, ActivationsOfGpt124MAtTheArticlesMicroBatch) {
  const auto run = zerolab("estimate --model gpt --preset 124M --world 8 --micro-batch 12 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  const auto& activations = json.at("activations");
  EXPECT_EQ(activations.at("micro_batch").get<std::int64_t>(), 12);
  EXPECT_EQ(activations.at("seq_len").get<std::int64_t>(), 1024);
  const auto& by_kind = activations.at("by_kind");
  EXPECT_EQ(by_kind.at("inputs").get<std::int64_t>(), 37'945'344);
  EXPECT_EQ(by_kind.at("block").get<std::int64_t>(), 2'267'283'456);
  EXPECT_EQ(by_kind.at("attention").get<std::int64_t>(), 14'155'776);
  EXPECT_EQ(by_kind.at("mlp_hidden").get<std::int64_t>(), 1'811'939'328);
  EXPECT_EQ(by_kind.at("logits").get<std::int64_t>(), 1'255'243'776);
  EXPECT_EQ(by_kind.at("scratch").get<std::int64_t>(), 528'482'304);
  EXPECT_EQ(by_kind.at("checkpoint").get<std::int64_t>(), 0);
  EXPECT_FALSE(by_kind.contains("working"));
  constexpr std::int64_t kTotal = 5'915'049'984;
  EXPECT_EQ(activations.at("bytes").get<std::int64_t>(), kTotal);
  for (const auto& stage : json.at("stages")) {
    EXPECT_EQ(stage.at("activation_bytes").get<std::int64_t>(), kTotal);
    EXPECT_EQ(stage.at("total_with_activations_bytes").get<std::int64_t>(),
              stage.at("total_bytes").get<std::int64_t>() + kTotal);
  }
  const auto table = zerolab("estimate --model gpt --preset 124M --world 8 --micro-batch 12");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_TRUE(has(table.out, "= 5915049984 bytes")) << table.out;
  EXPECT_TRUE(has(table.out, "  attention           14155776 bytes")) << table.out;
  EXPECT_TRUE(has(table.out, "matrix products' inputs and outputs in bf16")) << table.out;
  // fp32 activations: every product's input and output at 4 bytes:
  // 16N + 4NC + 12(4(8NC + 4N) + 8BHT + 32NC) + 4(NC + 2N + NVp) + 56NC.
  const auto fp32 = nlohmann::json::parse(
      zerolab("estimate --model gpt --preset 124M --world 8 --micro-batch 12 --precision fp32 "
              "--json")
          .out);
  EXPECT_EQ(fp32.at("activations").at("bytes").get<std::int64_t>(), 10'341'089'280);

  // Full checkpointing at the same shapes: 12 block outputs (4NC each) and one block's workspace
  // (the products' sides in 16 bits, 2·14NC, and 4(NC + 4N + 2BHT)) replace the blocks.
  const auto full = nlohmann::json::parse(
      zerolab("estimate --model gpt --preset 124M --world 8 --micro-batch 12 "
              "--activation-checkpointing full --json")
          .out);
  EXPECT_EQ(full.at("activations").at("checkpointing").get<std::string>(), "full");
  EXPECT_EQ(full.at("activations").at("by_kind").at("checkpoint").get<std::int64_t>(),
            12 * 4 * 12'288 * 768);
  EXPECT_EQ(full.at("activations").at("by_kind").at("recompute").get<std::int64_t>(),
            2 * 14 * 12'288 * 768 + 4 * (12'288 * 768 + 4 * 12'288 + 2 * 12 * 12 * 1024));
  EXPECT_EQ(full.at("activations").at("bytes").get<std::int64_t>(), 2'578'022'400);
  // With --cpu-checkpointing the 12 checkpoints move to the host, out of the device's bytes.
  const auto host = nlohmann::json::parse(
      zerolab("estimate --model gpt --preset 124M --world 8 --micro-batch 12 "
              "--activation-checkpointing full --cpu-checkpointing --json")
          .out);
  EXPECT_EQ(host.at("activations").at("host_bytes").get<std::int64_t>(), 12 * 4 * 12'288 * 768);
  EXPECT_EQ(host.at("activations").at("by_kind").at("checkpoint").get<std::int64_t>(), 0);
  EXPECT_EQ(host.at("activations").at("bytes").get<std::int64_t>(),
            2'578'022'400 - 12 * 4 * 12'288 * 768);
  // Without --micro-batch there is no activation term.
  const auto states = nlohmann::json::parse(zerolab("estimate --model gpt --world 8 --json").out);
  EXPECT_FALSE(states.contains("activations"));
  EXPECT_TRUE(states.at("stages")[0].at("activation_bytes").is_null());
}

TEST(EstimateCli, OptimizerBytesReplaceAdamsMoments) {
  const auto run =
      zerolab("estimate --params 7e9 --world 8 --precision fp32 --optimizer-bytes 12 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json.at("optimizer_bytes_per_param").get<int>(), 12);
  EXPECT_EQ(json.at("stages")[0].at("optimizer_bytes").get<std::int64_t>(), 84'000'000'000);
  EXPECT_EQ(json.at("stages")[0].at("params_bytes").get<std::int64_t>(), 28'000'000'000);
}

// fp32, k = 4: DDP holds a second 4Ψ, ZeRO-1 a 4Ψ/N shard, ZeRO-2 and -3 nothing more.
TEST(EstimateCli, GradAccumAddsTheAccumulator) {
  const auto run = zerolab("estimate --params 7e9 --world 8 --precision fp32 --grad-accum 4");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  expect_row(run.out, "0 (DDP)", {"28", "56", "0", "56", "140"});
  expect_row(run.out, "1", {"28", "31.5", "0", "7", "66.5"});
  expect_row(run.out, "2", {"28", "3.5", "0", "7", "38.5"});
  expect_row(run.out, "3", {"3.5", "3.5", "0", "7", "14"});
  EXPECT_TRUE(has(run.out, "4Ψ + (4Ψ + 4Ψ) + 8Ψ = 20Ψ")) << run.out;
  const auto json =
      nlohmann::json::parse(zerolab("estimate --params 7e9 --world 8 --grad-accum 4 --json").out);
  EXPECT_EQ(json.at("grad_accum_steps").get<int>(), 4);
  EXPECT_EQ(json.at("stages")[0].at("grad_accum_bytes").get<std::int64_t>(), 14'000'000'000);
  EXPECT_EQ(json.at("stages")[1].at("grad_accum_bytes").get<std::int64_t>(), 1'750'000'000);
  EXPECT_EQ(json.at("stages")[2].at("grad_accum_bytes").get<std::int64_t>(), 0);
}

// GPT-2 small on 8 GPUs in bf16: DeepSpeed's numbers on Ψ = 124,439,808, and zerolab's on
// Ψp = 124,478,976 (wte's 36,096 padded elements and 3,072 of unit padding).
TEST(EstimateCli, Gpt124MOn8Gpus) {
  const auto run =
      zerolab("estimate --model gpt --preset 124M --world 8 --bf16 --persistence-threshold 0");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(has(run.out,
                  "Ψ = 124439808 parameters (gpt 124M: n_layer 12, n_head 12, "
                  "n_embd 768, block_size 1024, vocab 50257 (padded to 50304))"))
      << run.out;
  EXPECT_TRUE(has(run.out, "36096 elements of zero rows past the vocabulary")) << run.out;
  EXPECT_TRUE(has(run.out, "Ψp = 124478976 elements")) << run.out;
  EXPECT_TRUE(has(run.out, "(+39168 elements")) << run.out;
  expect_bytes(run.out, "0 (DDP)", {"1991663616", "1991036928", "626688"});
  expect_bytes(run.out, "1", {"684634368", "684418944", "215424"});
  expect_bytes(run.out, "2", {"466796160", "466649280", "146880"});
  expect_bytes(run.out, "3", {"248957952", "248879616", "78336"});
  EXPECT_TRUE(has(run.out, "2Ψp + 2Ψp/N + 4Ψp/N + 8Ψp/N = 2Ψp + 14Ψp/N")) << run.out;
  // DeepSpeed's default threshold keeps ln_f (1,536 elements) whole at ZeRO-3.
  const auto persist =
      zerolab("estimate --model gpt --preset 124M --world 8 --bf16 --persistence-threshold 100000");
  ASSERT_EQ(persist.exit_code, 0) << persist.err;
  expect_bytes(persist.out, "3", {"248960640", "248879616", "81024"});
  expect_bytes(persist.out, "2", {"466796160", "466649280", "146880"});
  EXPECT_TRUE(has(persist.out, "Ψw = 1536 padded elements in 1 of the 14 units")) << persist.out;
  EXPECT_TRUE(has(persist.out,
                  "2(Ψp - Ψw)/N + 2Ψw + 2Ψp/N + 4Ψp/N + 8Ψp/N = 16Ψp/N + "
                  "2Ψw(N-1)/N"))
      << persist.out;
}

// hpZ's secondary shard at stage 3: 4 nodes of 8 GPUs hold 2Ψp/8 more each, the bytes the
// what-if of 32 ranks predicts (docs/timeline.md); the other stages do not change.
TEST(EstimateCli, HpzAddsTheSecondaryShardAtStageThree) {
  const std::string args =
      "estimate --model gpt --preset 124M --world 32 --bf16 --persistence-threshold 0";
  const auto plain = zerolab(args);
  const auto hpz = zerolab(args + " --hpz-partition-size 8");
  ASSERT_EQ(hpz.exit_code, 0) << hpz.err;
  EXPECT_EQ(row(plain.out, "3")[5], "62239744");
  EXPECT_EQ(row(hpz.out, "3")[5], "93359616");  // + 2 x 124,479,488 / 8, Ψp padded for N = 32
  EXPECT_EQ(row(hpz.out, "2"), row(plain.out, "2"));
  EXPECT_TRUE(has(hpz.out, "= 16Ψp/N + 2Ψp/K")) << hpz.out;
  EXPECT_TRUE(has(hpz.out, "K = 8: ZeRO++'s hpZ")) << hpz.out;
}

// Size flags override the preset: 124M with gpt2-medium's sizes is gpt2-medium.
TEST(EstimateCli, GptSizesOverrideThePreset) {
  const auto run = zerolab(
      "estimate --model gpt --preset 124M --n-layer 24 --n-head 16 --n-embd 1024 --world 1 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json.at("params").get<std::int64_t>(), 354'823'168);
  EXPECT_EQ(json.at("model").get<std::string>(), "gpt");
  EXPECT_EQ(json.at("shape").at("preset").get<std::string>(), "124M");
  EXPECT_EQ(json.at("shape").at("n_layer").get<int>(), 24);
  EXPECT_EQ(json.at("shape").at("vocab").get<int>(), 50257);
  EXPECT_EQ(json.at("shape").at("padded_vocab").get<int>(), 50304);
  EXPECT_EQ(json.at("units").get<int>(), 26);
  const auto medium = zerolab("estimate --model gpt --preset 350M --world 1 --json");
  EXPECT_EQ(nlohmann::json::parse(medium.out).at("params").get<std::int64_t>(), 354'823'168);
}

// 16 -> 64 -> 64 -> 8 has 5768 parameters (see estimate_test.cpp); on N = 4 its units pad to
// multiples of 256: 1088 -> 1280, 4160 -> 4352, 520 -> 768, Ψp = 6400.
TEST(EstimateCli, MlpModelCountsItsUnits) {
  const std::string mlp =
      "estimate --model mlp --layers 3 --width 64 --in 16 --classes 8 --world 4";
  const auto run = zerolab(mlp + " --persistence-threshold 0 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json.at("params").get<std::int64_t>(), 5768);
  EXPECT_EQ(json.at("padded_elems").get<std::int64_t>(), 6400);
  EXPECT_EQ(json.at("units").get<int>(), 3);
  EXPECT_EQ(json.at("stages")[0].at("total_bytes").get<std::int64_t>(), 6400 * 16);
  EXPECT_EQ(json.at("stages")[0].at("unpadded_total_bytes").get<std::int64_t>(), 5768 * 16);
  EXPECT_EQ(json.at("stages")[3].at("total_bytes").get<std::int64_t>(), 1600 * 16);
  EXPECT_EQ(json.at("stages")[3].at("unpadded_total_bytes").get<std::int64_t>(), 1442 * 16);
  // The table prints exact decimal GB, so small models do not show as 0.
  const auto table = zerolab(mlp + " --precision fp32 --persistence-threshold 0");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  expect_row(table.out, "0 (DDP)", {"0.0000256", "0.0000256", "0", "0.0000512", "0.0001024"});
  EXPECT_TRUE(has(table.out, "(mlp: layers 3, in 16, width 64, classes 8)")) << table.out;
  // Every unit under the threshold: ZeRO-3 holds DDP's parameters.
  const auto whole =
      nlohmann::json::parse(zerolab(mlp + " --persistence-threshold 4161 --json").out);
  EXPECT_EQ(whole.at("persistent_units").get<int>(), 3);
  EXPECT_EQ(whole.at("stages")[3].at("params_bytes").get<std::int64_t>(), 6400 * 2);
}

TEST(EstimateCli, AQuadrillionParametersFit) {
  const auto run = zerolab("estimate --params 1e15 --world 1 --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(nlohmann::json::parse(run.out).at("stages")[3].at("total_bytes").get<std::int64_t>(),
            16'000'000'000'000'000);
}

// 7B on 8 GPUs in bf16 with the optimizer on NVMe and ZeRO-3's shards in host memory: the
// device keeps 2Ψ + 2Ψ at DDP and ZeRO-1, 2Ψ + 2Ψ/N at ZeRO-2 and only the gradients' 2Ψ/N at
// ZeRO-3; the disk takes the master and Adam's 12Ψ (12Ψ/N sharded); the host ZeRO-3's 2Ψ/N. In
// fp32 with the optimizer in host memory, the host gets a 4-byte master that fp32 otherwise has
// none of.
// ZeRO-3's shards on NVMe pass through --param-buffer-count swap buffers in host memory, each the
// largest shard on disk up to --param-buffer-size (a bare count's 875M-element shard fills each of
// the default 5 with 1e8: 1 GB); --param-max-in-cpu keeps the shards that fit in host memory.
TEST(EstimateCli, ParametersOnNvmePassThroughSwapBuffers) {
  const std::string both =
      "estimate --params 7e9 --world 8 --offload-optimizer nvme --offload-param nvme --json";
  const auto stage3 = [&](const std::string& flags) {
    const auto run = zerolab(both + flags);
    EXPECT_EQ(run.exit_code, 0) << run.err;
    return nlohmann::json::parse(run.out).at("stages")[3];
  };
  auto stage = stage3("");
  EXPECT_EQ(stage.at("host_bytes").get<std::int64_t>(), 5 * 100'000'000 * 2);
  EXPECT_EQ(stage.at("disk_bytes").get<std::int64_t>(), 1'750'000'000 + 10'500'000'000);
  EXPECT_EQ(stage.at("host_formula"), "2·5b");
  EXPECT_EQ(stage.at("disk_formula"), "2Ψ/N + 4Ψ/N + 8Ψ/N");
  stage = stage3(" --param-buffer-count 2 --param-buffer-size 1000");
  EXPECT_EQ(stage.at("host_bytes").get<std::int64_t>(), 2 * 1000 * 2);
  EXPECT_EQ(stage.at("host_formula"), "2·2b");
  stage = stage3(" --param-max-in-cpu 875000000");
  EXPECT_EQ(stage.at("host_bytes").get<std::int64_t>(), 1'750'000'000);
  EXPECT_EQ(stage.at("disk_bytes").get<std::int64_t>(), 10'500'000'000);
  EXPECT_EQ(stage.at("host_formula"), "2Ψc");
  const auto gpt = zerolab(
      "estimate --model gpt --preset 124M --world 4 --offload-optimizer cpu --offload-param nvme "
      "--param-max-in-cpu 20000000");
  EXPECT_TRUE(has(gpt.out, "2Ψc + 2·5b + 4Ψp/N + 8Ψp/N | 2(Ψp/N - Ψc)")) << gpt.out;
  EXPECT_TRUE(has(gpt.out, "the parameters on disk pass through 5 swap buffers of b elements"))
      << gpt.out;
}

TEST(EstimateCli, OffloadPlacesTheStatesOnTheHostAndTheDisk) {
  const auto run = zerolab(
      "estimate --params 7e9 --world 8 --offload-optimizer nvme --offload-param cpu --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  EXPECT_EQ(json.at("offload_optimizer"), "nvme");
  EXPECT_EQ(json.at("offload_param"), "cpu");
  const std::int64_t device[] = {28'000'000'000, 28'000'000'000, 15'750'000'000, 1'750'000'000};
  const std::int64_t disk[] = {84'000'000'000, 10'500'000'000, 10'500'000'000, 10'500'000'000};
  for (int s = 0; s < 4; ++s) {
    const auto& stage = json.at("stages")[s];
    EXPECT_EQ(stage.at("total_bytes").get<std::int64_t>(), device[s]) << "stage " << s;
    EXPECT_EQ(stage.at("disk_bytes").get<std::int64_t>(), disk[s]) << "stage " << s;
    EXPECT_EQ(stage.at("host_bytes").get<std::int64_t>(), s == 3 ? 1'750'000'000 : 0);
    EXPECT_EQ(stage.at("master_bytes").get<std::int64_t>(), 0);
  }
  EXPECT_EQ(json.at("stages")[3].at("host_formula"), "2Ψ/N");
  EXPECT_EQ(json.at("stages")[3].at("disk_formula"), "4Ψ/N + 8Ψ/N");
  const auto table =
      zerolab("estimate --params 7e9 --world 8 --offload-optimizer nvme --offload-param cpu");
  EXPECT_TRUE(has(table.out,
                  "3                1.75         1.75         10.5  2Ψ/N | 2Ψ/N | "
                  "4Ψ/N + 8Ψ/N"))
      << table.out;

  const auto fp32 =
      zerolab("estimate --params 7e9 --world 8 --precision fp32 --offload-optimizer cpu --json");
  ASSERT_EQ(fp32.exit_code, 0) << fp32.err;
  const auto fp32_json = nlohmann::json::parse(fp32.out);
  EXPECT_EQ(fp32_json.at("master_bytes_per_param").get<int>(), 4);
  const auto& zero1 = fp32_json.at("stages")[1];
  EXPECT_EQ(zero1.at("host_master_bytes").get<std::int64_t>(), 3'500'000'000);
  EXPECT_EQ(zero1.at("host_optimizer_bytes").get<std::int64_t>(), 7'000'000'000);
  EXPECT_EQ(zero1.at("total_bytes").get<std::int64_t>(), 56'000'000'000);  // 4Ψ + 4Ψ
  const auto fp32_table =
      zerolab("estimate --params 7e9 --world 8 --precision fp32 --offload-optimizer cpu");
  EXPECT_TRUE(has(fp32_table.out,
                  "precision fp32: params 4 B, grads 4 B, fp32 master 4 B "
                  "(offloaded: the optimizer keeps one in any precision)"))
      << fp32_table.out;
}

// The memory wall on 16 GPUs of 32 GB with 96 GB of host memory and 1,750 GB of disk each: the
// JSON's exact counts, the table's ZeRO-3 column, and its sentence computed from them.
TEST(EstimateCli, TheMemoryWallSaysWhereEachPlacementStops) {
  const std::string flags =
      "estimate --params 7e9 --world 16 --device-gb 32 --host-gb 96 --disk-gb 1750";
  const auto run = zerolab(flags + " --json");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto json = nlohmann::json::parse(run.out);
  const auto& fit = json.at("fit");
  EXPECT_EQ(fit.at("device_bytes").get<std::int64_t>(), 32'000'000'000);
  ASSERT_EQ(fit.at("placements").size(), 6u);
  const auto& host_bound = fit.at("placements")[3];
  EXPECT_EQ(host_bound.at("offload_optimizer"), "cpu");
  EXPECT_EQ(host_bound.at("offload_param"), "cpu");
  EXPECT_EQ(host_bound.at("largest_params")[3].get<std::int64_t>(), 109'714'285'712);
  EXPECT_EQ(host_bound.at("bound_by")[3], "host");
  EXPECT_EQ(fit.at("placements")[4].at("largest_params")[3].get<std::int64_t>(), 256'000'000'000);
  const auto& both_on_disk = fit.at("placements")[5];
  EXPECT_EQ(both_on_disk.at("offload_param"), "nvme");
  EXPECT_EQ(both_on_disk.at("largest_params")[3].get<std::int64_t>(), 256'000'000'000);
  EXPECT_EQ(both_on_disk.at("bound_by")[3], "device");
  EXPECT_TRUE(nlohmann::json::parse(zerolab("estimate --params 7e9 --world 16 --json").out)
                  .at("fit")
                  .is_null());

  const auto table = zerolab(flags);
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_TRUE(has(table.out,
                  "optimizer on cpu, params on cpu        8.00B (device)     8.00B "
                  "(device)    15.06B (device)     109.71B (host)"))
      << table.out;
  EXPECT_TRUE(has(table.out,
                  "At ZeRO-3 the device alone fits 32.00B (device bound); optimizer "
                  "on cpu, 128.00B (4.0x, device bound)"))
      << table.out;
  EXPECT_TRUE(has(table.out,
                  "optimizer on nvme, params on cpu, 256.00B (8.0x, device bound); optimizer on "
                  "nvme, params on nvme, 256.00B (8.0x, device bound)."))
      << table.out;

  // A million GPUs with an exabyte each: ZeRO-3's search stops where int64 stops counting bytes,
  // and says so.
  const auto huge = zerolab(
      "estimate --params 7e9 --world 1000000 --device-gb 1e9 --host-gb 1e9 --disk-gb 1e9 --json");
  ASSERT_EQ(huge.exit_code, 0) << huge.err;
  EXPECT_EQ(nlohmann::json::parse(huge.out).at("fit").at("placements")[0].at("bound_by")[3],
            "count");
}

TEST(EstimateCli, BadFlagsFailWithOneLineAndExit2) {
  const std::string bad[] = {
      "estimate --params 0 --world 8",
      "estimate --params -7 --world 8",
      "estimate --params=-7e9 --world 8",
      "estimate --params 7.5 --world 8",
      "estimate --params 7e9x --world 8",
      "estimate --params 1e30 --world 8",
      "estimate --params 7e9 --world 0",
      "estimate --params 7e9 --world -2",
      "estimate --params 7e9",
      "estimate --params 7e9 --world 8 --optimizer-bytes 0",
      "estimate --params 7e9 --world 8 --optimizer-bytes -4",
      "estimate --params 7e9 --world 8 --dtype fp16",
      "estimate --params 7e9 --world 8 --precision fp64",
      "estimate --params 7e9 --world 8 --precision mixed",
      "estimate --params 7e9 --world 8 --bf16 --fp16",
      "estimate --params 7e9 --world 8 --bf16 --precision fp32",
      "estimate --params 7e9 --world 8 --fp16 --dtype mixed",
      "estimate --params 7e9 --world 8 --grad-accum 0",
      "estimate --params 7e9 --world 8 --grad-accum -3",
      "estimate --params 7e9 --world 8 --grad-accum x",
      "estimate --params 7e9 --world 8 --persistence-threshold 100",
      "estimate --params 7e9 --world 8 --hpz-partition-size 3",
      "estimate --params 7e9 --world 8 --hpz-partition-size 0",
      "estimate --model gpt --world 8 --persistence-threshold -1",
      "estimate --params 7e9 --model mlp --world 8",
      "estimate --world 8",
      "estimate --model bert --world 8",
      "estimate --params 7e9 --layers 3 --world 8",
      "estimate --params 7e9 --n-layer 3 --world 8",
      "estimate --model gpt --layers 3 --world 8",
      "estimate --model mlp --preset 124M --world 8",
      "estimate --model mlp --n-embd 64 --world 8",
      "estimate --model gpt --preset 7B --world 8",
      "estimate --model gpt --n-layer 0 --world 8",
      "estimate --model gpt --n-head 5 --n-embd 32 --world 8",
      "estimate --model gpt --vocab 0 --world 8",
      "estimate --model gpt --n-layer 2000000 --world 8",
      "estimate --model gpt --n-embd 4000000000 --vocab 4000000000 --world 8",
      "estimate --model mlp --layers 2000000 --world 8",
      "estimate --model mlp --width 0 --world 8",
      "estimate --params 1e15 --world 8 --optimizer-bytes 2000000000",
      "estimate --params 99999999999999999999 --world 8",
      "estimate --params 7e9 --world 8 --micro-batch 4",
      "estimate --params 7e9 --world 8 --offload-optimizer gpu",
      "estimate --params 7e9 --world 8 --offload-param nvme",
      "estimate --params 7e9 --world 8 --offload-param",
      "estimate --params 7e9 --world 8 --offload-optimizer cpu --offload-param nvme "
      "--param-buffer-count 0",
      "estimate --params 7e9 --world 8 --offload-optimizer cpu --offload-param nvme "
      "--param-buffer-size 0",
      "estimate --params 7e9 --world 8 --offload-optimizer cpu --offload-param nvme "
      "--param-max-in-cpu -1",
      "estimate --model gpt --world 8 --offload-optimizer cpu --offload-param nvme "
      "--param-buffer-size 10",
      "estimate --params 7e9 --world 8 --device-gb 32",
      "estimate --params 7e9 --world 8 --device-gb 32 --host-gb 96",
      "estimate --params 7e9 --world 8 --device-gb 0 --host-gb 96 --disk-gb 100",
      "estimate --params 7e9 --world 8 --device-gb 32 --host-gb -1 --disk-gb 100",
      "estimate --params 7e9 --world 8 --device-gb 32 --host-gb 96 --disk-gb nan",
      "estimate --params 7e9 --world 8 --device-gb 32 --host-gb 96 --disk-gb 1e10",
      "estimate --params 7e9 --world 8 --device-gb x --host-gb 96 --disk-gb 100",
      "estimate --model gpt --world 8 --micro-batch 0",
      "estimate --model mlp --world 8 --micro-batch -1",
      "estimate --model gpt --world 8 --micro-batch x",
      "estimate --model gpt --world 8 --activation-checkpointing full",
      "estimate --model mlp --world 8 --micro-batch 4 --activation-checkpointing full",
      "estimate --model gpt --world 8 --micro-batch 4 --activation-checkpointing every:0",
      "estimate --model gpt --world 8 --micro-batch 4 --cpu-checkpointing",
      "estimate --model gpt --world 8 --micro-batch 4 --activation-checkpointing selective "
      "--cpu-checkpointing",
      "estimate --model gpt --preset 124M --world 8 --micro-batch 4000000000000",
      "estimate --params 7e9 --world 8 --gpus-per-node 3",
      "estimate --params 7e9 --world 8 --gpus-per-node 0",
      "estimate --params 7e9 --world 8 --shard-group node",
      "estimate --params 7e9 --world 8 --shard-group rack --gpus-per-node 4",
      "estimate --params 7e9 --world 8 --gpus-per-node 4 --shard-group node "
      "--hpz-partition-size 4",
      "estimate --params 7e9 --world 8 --gpus-per-node 4 --shard-group node "
      "--zero-quantized-weights",
      "estimate --params 400000000000000000 --world 8 --grad-accum 100",
  };
  for (const auto& args : bad) {
    const auto run = zerolab(args);
    EXPECT_EQ(run.exit_code, 2) << args << "\n" << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << args << "\n" << run.err;
    EXPECT_EQ(run.err.rfind("zerolab: ", 0), 0u) << args << "\n" << run.err;
    EXPECT_EQ(run.out, "") << args;
  }
}

}  // namespace
}  // namespace zl
