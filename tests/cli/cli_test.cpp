// cli_test.cpp — runs the zerolab binary: DDP and the reference write byte-identical files, the
// saved data is exactly what was trained on, and bad input fails in one line leaving no files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "ckpt/checkpoint.hpp"
#include "ckpt/safetensors.hpp"
#include "comm/reduce.hpp"
#include "engines/partition.hpp"
#include "model/mlp.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "support/cli_fixture.hpp"
#include "support/command.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;

using test::CliTest;
using test::kSmall;
using test::kSmallShape;

TEST_F(CliTest, EveryStageAndTheReferenceWriteByteIdenticalFinalParameters) {
  const auto ref = zerolab("train --engine reference --world 4 " + kSmall + " --save-final " +
                           (dir_ / "ref.st").string());
  ASSERT_EQ(ref.exit_code, 0) << ref.err;
  const std::string ref_bytes = slurp(dir_ / "ref.st");
  EXPECT_GT(ref_bytes.size(), 1000u);
  for (const int stage : {0, 1, 2, 3}) {
    const fs::path file = dir_ / fmt::format("stage{}.st", stage);
    const auto run = zerolab(
        fmt::format("train --stage {} --world 4 {} --save-final {}", stage, kSmall, file.string()));
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(slurp(file), ref_bytes) << "stage " << stage;
  }
  const auto ddp = zerolab("train --engine ddp --world 4 " + kSmall + " --save-final " +
                           (dir_ / "ddp.st").string());
  ASSERT_EQ(ddp.exit_code, 0) << ddp.err;
  EXPECT_EQ(slurp(dir_ / "ddp.st"), ref_bytes);
  for (const int threads : {1, 3}) {  // the CPU threads per rank change no byte either
    const fs::path file = dir_ / fmt::format("threads{}.st", threads);
    const auto run = zerolab(fmt::format("train --stage 3 --world 4 --threads {} {} --save-final {}",
                                         threads, kSmall, file.string()));
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(slurp(file), ref_bytes) << threads << " threads";
  }
  const auto tensors = read_safetensors(dir_ / "ref.st");
  ASSERT_EQ(tensors.size(), 6u);
  EXPECT_EQ(tensors[0].name, "layers.0.weight");
  EXPECT_EQ(tensors[0].shape, (Shape{12, 5}));
  EXPECT_EQ(tensors[5].name, "layers.2.bias");
  EXPECT_EQ(tensors[5].shape, (Shape{4}));
}

// Activation checkpointing changes no byte of the trained parameters, at ZeRO-3 with bf16,
// accumulation and overlap; the summary shows the checkpoints and the recompute workspace.
TEST_F(CliTest, ActivationCheckpointingWritesByteIdenticalParameters) {
  const std::string gpt =
      "train --model gpt --preset tiny --stage 3 --world 3 --steps 3 --micro-batch 2 --bf16 "
      "--grad-accum 2 --overlap-comm --quiet";
  const auto none = zerolab(gpt + " --save-final " + (dir_ / "none.st").string());
  ASSERT_EQ(none.exit_code, 0) << none.err;
  for (const char* policy : {"full", "every:2", "selective"}) {
    const fs::path file = dir_ / fmt::format("{}.st", policy);
    const fs::path summary = dir_ / fmt::format("{}.json", policy);
    const auto run = zerolab(fmt::format("{} --activation-checkpointing {} --save-final {} "
                                         "--summary {}",
                                         gpt, policy, file.string(), summary.string()));
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(slurp(file), slurp(dir_ / "none.st")) << policy;
    const auto at_peak = nlohmann::json::parse(slurp(summary))["ranks"][0]["bytes"]
                                                              ["activations_at_peak"];
    EXPECT_GT(at_peak["recompute"].get<std::int64_t>(), 0) << policy;
  }
}

TEST_F(CliTest, ProgressLinesAndMetricsPerStep) {
  const auto run =
      zerolab("train --world 2 --layers 2 --width 8 --in 4 --classes 3 --steps 5 --metrics " +
              (dir_ / "m.jsonl").string());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("step     5/5  loss "), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("grad_norm"), std::string::npos);
  EXPECT_NE(run.out.find("sent_B"), std::string::npos);  // the per-rank ledger summary
  const std::string metrics = slurp(dir_ / "m.jsonl");
  std::istringstream lines(metrics);
  std::string line;
  int count = 0;
  while (std::getline(lines, line)) {
    ++count;
    EXPECT_NE(line.find("\"step\": " + std::to_string(count)), std::string::npos) << line;
    EXPECT_NE(line.find("\"loss\": "), std::string::npos);
    EXPECT_NE(line.find("\"grad_norm\": "), std::string::npos);
  }
  EXPECT_EQ(count, 5);
}

// --steps-per-print K: a progress line every K steps, and after the last.
TEST_F(CliTest, StepsPerPrintPrintsEveryKStepsAndTheLast) {
  const auto run = zerolab(
      "train --layers 2 --width 4 --in 3 --classes 2 --steps 5 --steps-per-print 2");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  for (const int step : {2, 4, 5}) {
    EXPECT_NE(run.out.find(fmt::format("step {:>5}/5  loss ", step)), std::string::npos) << run.out;
  }
  for (const int step : {1, 3}) {
    EXPECT_EQ(run.out.find(fmt::format("step {:>5}/5  loss ", step)), std::string::npos) << run.out;
  }
}

// --summary: both ledgers of every rank, as JSON, equal to the ZeRO-3 closed forms.
TEST_F(CliTest, SummaryHoldsBothLedgersPerRank) {
  const auto run = zerolab(
      fmt::format("train --stage 3 --world 4 {} --summary {}", kSmall, (dir_ / "s.json").string()));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto summary = nlohmann::json::parse(slurp(dir_ / "s.json"));
  EXPECT_EQ(summary["stage"], 3);
  EXPECT_EQ(summary["world"], 4);
  EXPECT_EQ(summary["params"], 12 * 5 + 12 + 12 * 12 + 12 + 4 * 12 + 4);
  const std::int64_t psi = summary["padded_params"];
  EXPECT_EQ(psi % (4 * 64), 0);
  ASSERT_EQ(summary["ranks"].size(), 4u);
  for (int r = 0; r < 4; ++r) {
    const auto& rank = summary["ranks"][r];
    EXPECT_EQ(rank["rank"], r);
    EXPECT_EQ(rank["bytes"]["params"], 4 * psi / 4);
    EXPECT_EQ(rank["bytes"]["grads"], 4 * psi / 4);
    EXPECT_EQ(rank["bytes"]["optimizer"], 8 * psi / 4);
    EXPECT_EQ(rank["bytes"]["master"], 0);
    EXPECT_GT(rank["bytes"]["gathered_peak"], 0);
    EXPECT_GE(rank["bytes"]["total_peak"], 16 * psi / 4);
    EXPECT_EQ(rank["comm"]["calls"]["reduce_scatter"], 4 * 3);        // 4 steps, 3 units
    EXPECT_EQ(rank["comm"]["calls"]["all_gather"], 4 * (2 * 3 + 1));  // 2 per unit + the norm
    EXPECT_GT(rank["comm"]["sent"], 0);
    EXPECT_GT(rank["comm"]["recv"], 0);
  }
}

// Same seed, any W: sample g and the initial parameters do not depend on the world size.
TEST_F(CliTest, DataAndInitAreTheSameForEveryWorld) {
  for (const int world : {1, 3}) {
    const auto run = zerolab(fmt::format("train --world {} {} --save-data {} --save-init {}", world,
                                         kSmall, (dir_ / fmt::format("data{}.st", world)).string(),
                                         (dir_ / fmt::format("init{}.st", world)).string()));
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  EXPECT_EQ(slurp(dir_ / "init1.st"), slurp(dir_ / "init3.st"));
  const auto one = read_safetensors(dir_ / "data1.st");
  const auto three = read_safetensors(dir_ / "data3.st");
  const auto x1 = to_floats(find_tensor(one, "x"));
  const auto x3 = to_floats(find_tensor(three, "x"));
  EXPECT_EQ(find_tensor(one, "x").shape, (Shape{4 * 1 * 3, 5}));
  EXPECT_EQ(find_tensor(three, "x").shape, (Shape{4 * 3 * 3, 5}));
  EXPECT_EQ(find_tensor(three, "y").shape, (Shape{4 * 3 * 3}));
  ASSERT_LT(x1.size(), x3.size());
  EXPECT_TRUE(std::equal(x1.begin(), x1.end(), x3.begin()));  // W=1 used a prefix of W=3's samples
  const auto y1 = to_int64s(find_tensor(one, "y"));
  const auto y3 = to_int64s(find_tensor(three, "y"));
  EXPECT_TRUE(std::equal(y1.begin(), y1.end(), y3.begin()));
}

// The saved data is what step 1 trained on: the init parameters on rows [r*B, (r+1)*B) of the
// file, averaged over ranks in rank order, give exactly the logged first loss.
TEST_F(CliTest, SavedDataIsWhatTheFirstStepUsed) {
  const int world = 3, rows = 3;
  const auto run = zerolab(
      fmt::format("train --world {} {} --save-data {} --save-init {} --metrics {}", world, kSmall,
                  (dir_ / "d.st").string(), (dir_ / "i.st").string(), (dir_ / "m.jsonl").string()));
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto data = read_safetensors(dir_ / "d.st");
  const auto init = read_safetensors(dir_ / "i.st");
  const auto x = to_floats(find_tensor(data, "x"));
  const auto y = to_int64s(find_tensor(data, "y"));
  CpuDevice device;
  Mlp model(device, {.layers = 3, .width = 12, .in = 5, .classes = 4});
  std::vector<std::vector<float>> params(3);
  for (int u = 0; u < 3; ++u) {
    for (const char* part : {"weight", "bias"}) {
      const auto values = to_floats(find_tensor(init, fmt::format("layers.{}.{}", u, part)));
      params[u].insert(params[u].end(), values.begin(), values.end());
    }
  }
  std::vector<float> losses(world);
  for (int r = 0; r < world; ++r) {
    Batch batch;
    batch.rows = rows;
    batch.features = 5;
    batch.x.assign(x.begin() + r * rows * 5, x.begin() + (r + 1) * rows * 5);
    batch.y.assign(y.begin() + r * rows, y.begin() + (r + 1) * rows);
    model.begin(batch);
    for (int u = 0; u < 3; ++u) model.forward_unit(u, params[u]);
    losses[r] = model.loss();
  }
  std::vector<const void*> inputs;
  for (const float& loss : losses) inputs.push_back(&loss);
  float mean = 0.0f;
  reduce_rank_order(inputs, &mean, 1, DType::F32, ReduceOp::Avg);
  const std::string first_line =
      slurp(dir_ / "m.jsonl").substr(0, slurp(dir_ / "m.jsonl").find('\n'));
  EXPECT_NE(first_line.find(fmt::format("\"loss\": {},", mean)), std::string::npos)
      << first_line << " vs " << mean;
}

// Bad input: one line on stderr naming the problem, a non-zero exit, and no output files.
struct BadInput {
  std::string args;
  std::string expected;  // a piece of the message
};

TEST_F(CliTest, BadInputFailsInOneLineAndLeavesNoFiles) {
  // Good output paths beside the bad input: none of them may be created.
  const std::string outputs =
      " --save-init " + (dir_ / "i.st").string() + " --save-data " + (dir_ / "d.st").string();
  const std::string mics_config = dir_.string() + "_mics.json";  // beside the folder, not in it
  std::ofstream(mics_config) << R"({"zero_optimization": {"stage": 3, "mics_shard_size": 2}})";
  const BadInput cases[] = {
      {"train --frobnicate 3", "--frobnicate"},
      {"train --world 0", "--world 0 is invalid"},
      {"train --world -2", "--world -2 is invalid"},
      {"train --gpus-per-node 0", "--gpus-per-node 0 is invalid"},
      {"train --world 6 --gpus-per-node 4", "--gpus-per-node 4 does not divide --world 6"},
      {"train --layers 0", "--layers 0 is invalid"},
      {"train --width 0", "--width 0 is invalid"},
      {"train --in 0", "--in 0 is invalid"},
      {"train --classes 0", "--classes 0 is invalid"},
      {"train --steps 0", "--steps 0 is invalid"},
      {"train --micro-batch 0", "--micro-batch 0 is invalid"},
      {"train --engine zero9", "--engine"},
      {"train --stage 4", "--stage 4 is invalid"},
      {"train --stage -1", "--stage -1 is invalid"},
      {"train --stage 1 --engine zero2", "excludes"},
      {"train --world many", "--world"},
      {"train --threads 0", "--threads '0' is invalid"},
      {"train --threads -2", "--threads '-2' is invalid"},
      {"train --threads two", "--threads 'two' is invalid"},
      {"train --save-final /nonexistent-dir/f.st", "does not exist"},
      {"train --metrics " + dir_.string(), "is a directory"},
      {"train --grad-accum 0", "--grad-accum 0 is invalid"},
      {"train --clip -1", "--clip -1 is invalid"},
      {"train --reduce-bucket 1.5", "--reduce-bucket 1.5 is invalid"},
      {"train --steps-per-print 0", "--steps-per-print 0 is invalid"},
      {"train --bf16 --fp16", "excludes"},
      {"train --precision fp8", "--precision"},
      {"train --n-layer 2", "--n-layer needs --model gpt"},
      {"train --model gpt --preset huge", "huge"},
      {"train --config /nonexistent-dir/ds.json", "/nonexistent-dir/ds.json"},
      {"train --activation-checkpointing full", "the MLP has none of"},
      {"train --model gpt --activation-checkpointing some",
       "--activation-checkpointing some is not known"},
      {"train --model gpt --activation-checkpointing every:0", "every:K needs a whole number"},
      {"train --model gpt --activation-checkpointing every:x", "every:K needs a whole number"},
      {"train --model gpt --cpu-checkpointing", "--cpu-checkpointing keeps full checkpoints"},
      {"train --save-final " + (dir_ / "x.st").string() + " --metrics " + (dir_ / "x.st").string(),
       "--metrics and --save-final are the same file"},
      {"train --summary " + (dir_ / "s.json").string() + " --trace " +
           (dir_ / "." / "s.json").string(),
       "--summary and --trace are the same file"},
      {"train --checkpoint-dir /dev/null",
       "--checkpoint-dir /dev/null is a file: give a directory"},
      {"train --lr inf", "--lr inf is invalid: the learning rate must be a finite number > 0"},
      {"train --lr nan", "--lr nan is invalid"},
      {"train --beta1 1.0", "--beta1 1 is invalid: use a number in [0, 1)"},
      {"train --beta2 -0.5", "--beta2 -0.5 is invalid"},
      {"train --eps -1e-8", "--eps -1e-08 is invalid: use a finite number >= 0"},
      {"train --weight-decay inf", "--weight-decay inf is invalid"},
      {"train --seed -1",
       "--seed -1 is invalid: use a whole number from 0 to 18446744073709551615"},
      {"train --model gpt --activation-checkpointing selective --cpu-checkpointing",
       "not selective"},
      {"train --world 100000", "--world 100000 is invalid for --backend sim"},
      {"train --grad-accum 1000000000000000",
       "gradient accumulation of 1000000000000000 micro-batches is invalid: use at most 1048576"},
      {"train --layers 3 --width 200000 --world 4", "GiB of host memory"},
      {"train --model gpt --preset 350M --world 64", "or pass --no-memory-check"},
      {"train --config /dev/zero", "/dev/zero: the config file is larger than 1 MiB"},
      {"train --offload-param --stage 2", "--offload-param offloads ZeRO-3's parameter shards"},
      {"train --nvme-path /tmp", "nvme_path /tmp is set but the optimizer is not offloaded"},
      {"train --offload-optimizer --nvme-path /nonexistent/zl",
       "--nvme-path /nonexistent/zl is "
       "not a folder: create it"},
      {"train --offload-optimizer --nvme-path /proc",
       "cannot make the swap folder /proc/zerolab-swap/rank0: "},
      {"train --stage 3 --accelerator cpu-detached --offload-param", "--offload-param keeps"},
      {"train --stage 0 --world 4 --gpus-per-node 2 --shard-group node",
       "--shard-group node shards ZeRO's states inside a node, and DDP shards none: use --stage 1, "
       "2 or 3"},
      {"train --shard-group rack", "--shard-group"},
      {"train --stage 2 --world 4 --hpz-partition-size 2",
       "zero_hpz_partition_size 2 partitions ZeRO-3's parameters: use --stage 3"},
      {"train --stage 3 --world 4 --hpz-partition-size 3",
       "zero_hpz_partition_size 3 does not divide a world of 4"},
      {"train --stage 3 --world 6 --gpus-per-node 2 --hpz-partition-size 3",
       "zero_hpz_partition_size 3 splits nodes of 2 ranks unevenly"},
      {"train --stage 3 --world 4 --gpus-per-node 2 --shard-group node --hpz-partition-size 2",
       "zero_quantized_gradients) and --shard-group node both split ZeRO-3: use one of them"},
      {"train --stage 2 --world 4 --zero-quantized-weights",
       "zero_quantized_weights quantizes ZeRO-3's communication: use --stage 3"},
      {"train --hpz-partition-size 0", "--hpz-partition-size 0 is invalid"},
      {"train --stage 3 --offload-optimizer --offload-param --param-nvme-path /tmp "
       "--param-buffer-count 0",
       "offload_param.buffer_count (--param-buffer-count) 0 is invalid: use 1 to 1024 swap "
       "buffers"},
      {"train --stage 3 --offload-optimizer --offload-param --param-nvme-path /tmp "
       "--param-buffer-size 10",
       "offload_param.buffer_size 10 cannot hold parameter unit 0's shard of 1088 elements: raise "
       "it to at least 1088 (--param-buffer-size)"},
      {"train --stage 3 --world 8 --gpus-per-node 4 --config " + mics_config,
       "a shard group of 2 ranks (mics_shard_size) is not a node of 4: hybrid sharding shards "
       "inside one node of --gpus-per-node ranks; give --gpus-per-node 2 or mics_shard_size 4"},
      {"", "subcommand"},
  };
  for (const auto& bad : cases) {
    const std::string args = bad.args.empty() ? bad.args : bad.args + outputs;
    const auto run = zerolab(args);
    EXPECT_NE(run.exit_code, 0) << args;
    EXPECT_NE(run.err.find(bad.expected), std::string::npos) << args << " printed: " << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1)
        << args << " printed: " << run.err;
    EXPECT_TRUE(files().empty()) << args << " left " << files().front();
  }
  // Groups on nccl: refused in one line, naming the key where zerolab has NCCL (else the build).
  for (const auto& [args, key] :
       {std::pair<std::string, std::string>{
            "--stage 3 --world 4 --gpus-per-node 2 --shard-group node", "--shard-group node"},
        {"--stage 3 --world 4 --hpz-partition-size 2", "zero_hpz_partition_size"},
        {"--stage 3 --world 4 --zero-quantized-gradients", "zero_quantized_gradients"}}) {
    const auto run = zerolab("train --backend nccl " + args + outputs);
    EXPECT_NE(run.exit_code, 0) << args;
    const bool named =
        run.err.find(key + " splits the ranks into groups, which --backend nccl does not build") !=
        std::string::npos;
    const bool unbuilt = run.err.find("built without CUDA and NCCL") != std::string::npos;
    EXPECT_TRUE(named || unbuilt) << args << " printed: " << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1)
        << args << " printed: " << run.err;
    EXPECT_TRUE(files().empty()) << args;
  }
  fs::remove(mics_config);
  const auto env = zerolab("train" + outputs, "ZL_THREADS=lots ");
  EXPECT_NE(env.exit_code, 0);
  EXPECT_NE(env.err.find("ZL_THREADS 'lots' is invalid"), std::string::npos) << env.err;
  EXPECT_EQ(std::count(env.err.begin(), env.err.end(), '\n'), 1) << env.err;
}

// --accelerator, --attention and --backend nccl: wrong combinations fail in one line before
// anything runs (built without NCCL or CUDA, the line says that instead, naming the same flag).
// The mpi combinations are in tests/mpi, which launches MPI without the leak check OpenMPI fails.
TEST_F(CliTest, AcceleratorAndNcclCombinationsFailInOneLine) {
  const BadInput cases[] = {
      {"train --accelerator tpu", "--accelerator"},
      {"train --backend nccl --accelerator cpu", "--backend nccl"},
      {"train --backend nccl --engine reference", "--backend nccl"},
      {"train --accelerator cpu-detached --engine reference", "--engine reference runs on the CPU"},
      {"train --accelerator cpu-detached --offload-optimizer", "--offload-optimizer keeps"},
      {"train --model gpt --attention fast", "--attention fast runs on GPUs: add --accelerator cuda"},
      {"train --attention flash", "--attention"},
  };
  for (const auto& bad : cases) {
    const auto run = zerolab(bad.args + " " + kSmall);
    EXPECT_NE(run.exit_code, 0) << bad.args;
    EXPECT_NE(run.err.find(bad.expected), std::string::npos) << bad.args << " printed: " << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1)
        << bad.args << " printed: " << run.err;
  }
  // Without a GPU (or without CUDA built in) --accelerator cuda is one line naming it.
  const auto cuda = zerolab("train --accelerator cuda " + kSmall);
  if (cuda.exit_code != 0) {
    EXPECT_NE(cuda.err.find("--accelerator cuda"), std::string::npos) << cuda.err;
    EXPECT_EQ(std::count(cuda.err.begin(), cuda.err.end(), '\n'), 1) << cuda.err;
  }
}

// The detached device prints a device line under each step; its bits are the CPU's.
TEST_F(CliTest, DetachedMemoryPrintsTheDeviceLineAndTheCpusBits) {
  const std::string args = "train --stage 3 --world 2 --layers 3 --width 12 --in 5 --classes 4 "
                           "--steps 2 --micro-batch 3 --save-final ";
  const auto cpu = zerolab(args + (dir_ / "cpu.st").string());
  const auto detached =
      zerolab(args + (dir_ / "detached.st").string() + " --accelerator cpu-detached");
  ASSERT_EQ(cpu.exit_code, 0) << cpu.err;
  ASSERT_EQ(detached.exit_code, 0) << detached.err;
  EXPECT_EQ(slurp(dir_ / "cpu.st"), slurp(dir_ / "detached.st"));
  EXPECT_EQ(cpu.out.find("tokens/s"), std::string::npos);
  // MFU needs the device's peak, which a CPU has none of here.
  EXPECT_NE(detached.out.find("CPU (detached memory): "), std::string::npos) << detached.out;
  EXPECT_NE(detached.out.find("MFU n/a"), std::string::npos) << detached.out;
  EXPECT_NE(detached.out.find("peak MiB: params "), std::string::npos) << detached.out;
}

// --init starts from a file of the model's parameters (here another seed's init, as --save-init
// wrote it): the run's initial parameters are that file, bit for bit, for every engine.
TEST_F(CliTest, InitStartsFromAFileOfParameters) {
  const fs::path source = dir_ / "seed5.st";
  ASSERT_EQ(
      zerolab(fmt::format("train {} --seed 5 --save-init {}", kSmall, source.string())).exit_code,
      0);
  for (const std::string engine : {"--stage 3 --world 4", "--engine reference --world 2"}) {
    const fs::path init = dir_ / "init.st";
    const auto run = zerolab(fmt::format("train {} {} --init {} --save-init {}", engine, kSmall,
                                         source.string(), init.string()));
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(slurp(init), slurp(source)) << engine;
  }
  // zerolab's own file names the configuration it holds; a file without that metadata (another
  // tool's) is checked by its shapes.
  const auto deeper = zerolab(
      fmt::format("train --layers 4 --width 12 --in 5 --classes 4 --init {}", source.string()));
  EXPECT_NE(deeper.exit_code, 0);
  EXPECT_EQ(deeper.err, fmt::format("zerolab: error: --init {} holds a model with layers 3, this "
                                    "run's has 4: give --layers 3 or a file of this run's model\n",
                                    source.string()));
  const fs::path bare = dir_ / "bare.st";
  write_safetensors(bare, read_safetensors(source));
  const auto bare_deeper = zerolab(
      fmt::format("train --layers 4 --width 12 --in 5 --classes 4 --init {}", bare.string()));
  EXPECT_NE(bare_deeper.exit_code, 0);
  EXPECT_EQ(bare_deeper.err,
            fmt::format("zerolab: error: {}: layers.2.weight has shape [4, 12] but the model "
                        "needs [12, 12]: check --layers, --width, --in, --classes\n",
                        bare.string()));
  const auto other_shape = zerolab(
      fmt::format("train --layers 3 --width 11 --in 5 --classes 4 --init {}", bare.string()));
  EXPECT_NE(other_shape.err.find("has shape [12, 5] but the model needs [11, 5]"),
            std::string::npos)
      << other_shape.err;
  // A NaN weight is named with its file and tensor (it used to surface as "gradient norm is nan").
  auto tensors = read_safetensors(source);
  const float nan_value = NAN;
  std::memcpy(tensors[2].bytes.data() + 3 * sizeof(float), &nan_value, sizeof(float));
  const fs::path damaged = dir_ / "nan.st";
  write_safetensors(damaged, tensors);
  const auto nan = zerolab(fmt::format("train {} --init {}", kSmall, damaged.string()));
  EXPECT_NE(nan.exit_code, 0);
  EXPECT_EQ(nan.err, fmt::format("zerolab: error: {}: {} element 3 is nan: initial parameters "
                                 "must be finite: give a file without NaN or infinite values\n",
                                 damaged.string(), tensors[2].name));
}

}  // namespace
}  // namespace zl
