// mpi_train_test.cpp — `zerolab train --backend mpi` under `mpirun -np 4` against the sim backend
// at --world 4: deterministic mode writes byte-identical final parameters, logs the same losses
// and gradient norms and measures the same ledgers, for every stage, mixed precision and the GPT;
// native mode stays within its stated tolerance; checkpoints move between the backends; bad
// combinations are one-line errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "ckpt/safetensors.hpp"
#include "ckpt/test_files.hpp"
#include "mpi/mpi_launch.hpp"
#include "support/command.hpp"
#include "support/test_paths.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;

// Native mode's promise (docs/backends.md): after kNativeSteps steps, the largest |mpi - sim| over
// all parameters is at most the tolerance times the largest |sim| parameter: 1e-5 in fp32; 2e-2
// in bf16, whose gradient sums MPI rounds to bf16 after every pair of ranks.
constexpr double kNativeToleranceFp32 = 1e-5;
constexpr double kNativeToleranceBf16 = 2e-2;
constexpr int kNativeSteps = 10;

const std::string kSmall =
    "--layers 3 --width 12 --in 5 --classes 4 --steps 3 --micro-batch 3 --lr 0.02 --quiet";

CommandResult zerolab(const std::string& args) {
  return run_command(fmt::format("{} {}", zl::test::zerolab_binary(), args));
}

// `zerolab` alone with --backend mpi: a world of one (an MPI singleton).
CommandResult zerolab_singleton(const std::string& args) {
  return run_command(
      fmt::format("{}{} {}", test::without_leak_check(), zl::test::zerolab_binary(), args));
}

CommandResult zerolab_mpi(int ranks, const std::string& args) {
  return run_command(fmt::format("{}{} {}", test::mpirun(ranks), zl::test::zerolab_binary(), args));
}

// Loss, gradient norm and skip flag of every step in a --metrics file: what must be equal.
std::vector<std::string> logged_steps(const fs::path& metrics) {
  std::vector<std::string> steps;
  std::istringstream lines(slurp(metrics));
  for (std::string line; std::getline(lines, line);) {
    const auto step = nlohmann::json::parse(line);
    steps.push_back(fmt::format("step {} loss {} grad_norm {} skipped {}", step["step"].dump(),
                                step["loss"].dump(), step["grad_norm"].dump(),
                                step["skipped"].dump()));
  }
  return steps;
}

// Every rank's memory and traffic ledgers in a --summary file.
std::vector<std::string> ledgers(const fs::path& summary) {
  std::vector<std::string> ranks;
  const auto document = nlohmann::json::parse(slurp(summary));
  for (const auto& rank : document["ranks"]) {
    ranks.push_back(rank["bytes"].dump() + rank["comm"].dump());
  }
  return ranks;
}

// The largest |a - b| over all tensors, relative to the largest |a|.
double max_relative_diff(const fs::path& a_file, const fs::path& b_file) {
  const auto a = read_safetensors(a_file);
  const auto b = read_safetensors(b_file);
  EXPECT_EQ(a.size(), b.size());
  double max_diff = 0.0, max_abs = 0.0;
  for (std::size_t t = 0; t < std::min(a.size(), b.size()); ++t) {
    EXPECT_EQ(a[t].name, b[t].name);
    const std::vector<float> x = to_floats(a[t]), y = to_floats(b[t]);
    EXPECT_EQ(x.size(), y.size());
    for (std::size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
      max_diff = std::max(max_diff, std::abs(static_cast<double>(x[i]) - y[i]));
      max_abs = std::max(max_abs, std::abs(static_cast<double>(x[i])));
    }
  }
  return max_diff / max_abs;
}

class MpiTrain : public ::testing::Test {
 protected:
  fs::path file(const std::string& name) const { return temp_.path() / name; }

  // Runs `args` on the sim at --world 4 and on mpi -np 4 (deterministic) and expects the same
  // final bytes, logged steps and ledgers.
  void expect_same_as_sim(const std::string& args) {
    SCOPED_TRACE(args);
    const auto out = [&](const std::string& name) {
      const std::string base = file(name).string();
      return fmt::format("--save-final {0}.st --metrics {0}.jsonl --summary {0}.json", base);
    };
    const auto sim = zerolab(fmt::format("train --world 4 {} {}", args, out("sim")));
    ASSERT_EQ(sim.exit_code, 0) << sim.err;
    const auto mpi = zerolab_mpi(4, fmt::format("train --backend mpi {} {}", args, out("mpi")));
    ASSERT_EQ(mpi.exit_code, 0) << mpi.out << mpi.err;
    EXPECT_EQ(slurp(file("sim.st")), slurp(file("mpi.st")));
    EXPECT_GT(slurp(file("mpi.st")).size(), 100u);
    const auto sim_steps = logged_steps(file("sim.jsonl"));
    EXPECT_FALSE(sim_steps.empty());
    EXPECT_EQ(sim_steps, logged_steps(file("mpi.jsonl")));
    const auto sim_ledgers = ledgers(file("sim.json"));
    EXPECT_EQ(sim_ledgers.size(), 4u);
    EXPECT_EQ(sim_ledgers, ledgers(file("mpi.json")));
    // Only rank 0's process prints: one progress summary, not four.
    const std::string& text = mpi.out;
    EXPECT_EQ(std::count(text.begin(), text.end(), '\n'),
              std::count(sim.out.begin(), sim.out.end(), '\n'))
        << text;
  }

  test::TempDir temp_;
};

TEST_F(MpiTrain, EveryStageMatchesTheSimBitwise) {
  for (const int stage : {0, 1, 2, 3})
    expect_same_as_sim(fmt::format("--stage {} {}", stage, kSmall));
}

TEST_F(MpiTrain, MixedPrecisionAndTrainingFeaturesMatchTheSimBitwise) {
  expect_same_as_sim("--stage 1 --bf16 " + kSmall);
  expect_same_as_sim("--stage 3 --fp16 " + kSmall);
  expect_same_as_sim(
      "--stage 2 --bf16 --grad-accum 2 --clip 0.05 --overlap-comm --reduce-bucket 50 " + kSmall);
}

// Two nodes of two: both backends sum each node's ranks, then the nodes (comm/reduce.hpp).
TEST_F(MpiTrain, NodesOfTwoMatchTheSimBitwise) {
  expect_same_as_sim("--stage 2 --gpus-per-node 2 " + kSmall);
  expect_same_as_sim("--stage 0 --bf16 --gpus-per-node 2 " + kSmall);
}

// Groups of ranks (MPI_Comm_split): hybrid sharding at every stage, HSDP with ZeRO-3's
// features, hpZ, and ZeRO++'s quantized collectives (MPI_Alltoall), each the sim's bits and
// ledgers, per link level too.
TEST_F(MpiTrain, GroupsOfRanksMatchTheSimBitwise) {
  for (const int stage : {1, 2, 3}) {
    expect_same_as_sim(
        fmt::format("--stage {} --gpus-per-node 2 --shard-group node {}", stage, kSmall));
  }
  expect_same_as_sim(
      "--stage 3 --bf16 --gpus-per-node 2 --shard-group node --overlap-comm --prefetch-bucket "
      "1000 --persistence-threshold 100 --offload-optimizer --offload-param " +
      kSmall);
  expect_same_as_sim("--stage 3 --gpus-per-node 2 --hpz-partition-size 2 " + kSmall);
  expect_same_as_sim(
      "--stage 3 --bf16 --gpus-per-node 2 --zero-quantized-weights --zero-quantized-gradients " +
      kSmall);
}

TEST_F(MpiTrain, GptTinyMatchesTheSimBitwise) {
  expect_same_as_sim("--model gpt --steps 2 --micro-batch 2 --stage 3 --quiet");
  expect_same_as_sim("--model gpt --steps 2 --micro-batch 2 --stage 0 --bf16 --quiet");
}

TEST_F(MpiTrain, NativeReductionStaysWithinTheStatedTolerance) {
  const std::string args = fmt::format(
      "--stage 2 --layers 3 --width 64 --in 16 --classes 8 --steps {} --micro-batch 8 --quiet",
      kNativeSteps);
  for (const auto& [precision, tolerance] :
       {std::pair{"fp32", kNativeToleranceFp32}, std::pair{"bf16", kNativeToleranceBf16}}) {
    SCOPED_TRACE(precision);
    const std::string run_args = fmt::format("{} --precision {}", args, precision);
    ASSERT_EQ(zerolab(fmt::format("train --world 4 {} --save-final {}", run_args,
                                  file("sim.st").string()))
                  .exit_code,
              0);
    const auto native =
        zerolab_mpi(4, fmt::format("train --backend mpi --mpi-reduce native {} --save-final {}",
                                   run_args, file("native.st").string()));
    ASSERT_EQ(native.exit_code, 0) << native.err;
    const double native_diff = max_relative_diff(file("sim.st"), file("native.st"));
    std::cout << precision << " native vs sim after " << kNativeSteps
              << " steps: max |diff| / max |param| = " << native_diff << " (tolerance " << tolerance
              << ")\n";
    EXPECT_LE(native_diff, tolerance);
    // The comparison can fail: a run that differs in one seed is far outside the tolerance.
    ASSERT_EQ(zerolab(fmt::format("train --world 4 {} --seed 1 --save-final {}", run_args,
                                  file("seed1.st").string()))
                  .exit_code,
              0);
    const double seed_diff = max_relative_diff(file("sim.st"), file("seed1.st"));
    std::cout << precision << " seed 1 vs seed 0: " << seed_diff << "\n";
    EXPECT_GT(seed_diff, 50 * tolerance);
  }
}

TEST_F(MpiTrain, CheckpointsMoveBetweenMpiAndSim) {
  const std::string args =
      "--stage 3 --layers 3 --width 12 --in 5 --classes 4 --micro-batch 3 --quiet";
  const std::string ckpt = file("ckpt").string();
  const auto saved = zerolab_mpi(
      4, fmt::format("train --backend mpi {} --steps 2 --checkpoint-dir {}", args, ckpt));
  ASSERT_EQ(saved.exit_code, 0) << saved.err;
  const auto straight = zerolab(fmt::format("train --world 4 {} --steps 4 --save-final {}", args,
                                            file("straight.st").string()));
  ASSERT_EQ(straight.exit_code, 0) << straight.err;
  const auto on_sim =
      zerolab(fmt::format("train --world 4 {} --steps 4 --resume {} --save-final {}", args, ckpt,
                          file("sim_resumed.st").string()));
  ASSERT_EQ(on_sim.exit_code, 0) << on_sim.err;
  const auto on_mpi =
      zerolab_mpi(4, fmt::format("train --backend mpi {} --steps 4 --resume {} --save-final {}",
                                 args, ckpt, file("mpi_resumed.st").string()));
  ASSERT_EQ(on_mpi.exit_code, 0) << on_mpi.err;
  EXPECT_EQ(slurp(file("straight.st")), slurp(file("sim_resumed.st")));
  EXPECT_EQ(slurp(file("straight.st")), slurp(file("mpi_resumed.st")));
}

TEST_F(MpiTrain, WithoutMpirunItIsAWorldOfOne) {
  const auto sim = zerolab(
      fmt::format("train --world 1 --stage 1 {} --save-final {}", kSmall, file("sim.st").string()));
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  const auto mpi = zerolab_singleton(fmt::format("train --backend mpi --stage 1 {} --save-final {}",
                                                 kSmall, file("mpi.st").string()));
  ASSERT_EQ(mpi.exit_code, 0) << mpi.err;
  EXPECT_EQ(slurp(file("sim.st")), slurp(file("mpi.st")));
}

TEST_F(MpiTrain, AWorldThatDisagreesWithMpirunIsAnError) {
  const auto run = zerolab_mpi(2, "train --backend mpi --world 3 " + kSmall);
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.err.find("--world 3 does not match the 2 processes mpirun started"),
            std::string::npos)
      << run.err;
}

// MPMD: processes started with different flags (mpirun's "A : B") fail before the first step,
// within seconds, naming the first field that differs and which rank holds which value, where
// they used to hang, segfault or train a wrong result.
TEST_F(MpiTrain, RanksStartedWithDifferentFlagsFailNamingTheFlag) {
  const std::string base = "train --backend mpi --layers 3 --in 5 --classes 4 --quiet";
  struct Mismatch {
    std::string rank0, rank1, message;
  };
  const Mismatch cases[] = {
      {"--lr 0.02", "--lr 0.05", "the ranks disagree on --lr: rank 0 \"0.02\"; rank 1 \"0.05\""},
      {"--stage 0", "--stage 1", "the ranks disagree on --engine"},
      {"--steps 3", "--steps 9", "the ranks disagree on --steps"},
      {"--seed 2", "--seed 3", "the ranks disagree on --seed"},
      {"--micro-batch 3", "--micro-batch 5", "the ranks disagree on --micro-batch"},
      {"--width 12", "--width 13", "the ranks disagree on --model"},
  };
  for (const auto& [rank0, rank1, message] : cases) {
    const auto started = std::chrono::steady_clock::now();
    const auto run = run_command(fmt::format("timeout 60 {}{} {} {} : -np 1 {} {} {}",
                                             test::mpirun(1), zl::test::zerolab_binary(), base,
                                             rank0, zl::test::zerolab_binary(), base, rank1));
    EXPECT_NE(run.exit_code, 0) << rank1;
    EXPECT_NE(run.err.find(message), std::string::npos) << rank1 << "\n" << run.err;
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(30)) << rank1;
  }
}

// Every process reads the same command line: its error is printed once, by rank 0, not once per
// rank (mpirun adds its own note that a process failed).
TEST_F(MpiTrain, ACommandLineErrorIsPrintedOnceNotOncePerRank) {
  for (const std::string args : {"--backend mpi --stage 4", "--backend mpi --lr 0"}) {
    const auto run = zerolab_mpi(4, "train " + args + " " + kSmall);
    EXPECT_NE(run.exit_code, 0) << args;
    std::size_t ours = 0;
    for (std::size_t at = run.err.find("zerolab: "); at != std::string::npos;
         at = run.err.find("zerolab: ", at + 1)) {
      ++ours;
    }
    EXPECT_EQ(ours, 1u) << args << "\n" << run.err;
  }
}

// A full disk fails every rank's checkpoint write at once: the ranks hand their reasons to rank 0,
// which ends the job with one line, naming the first rank that could not write (each process used
// to print its own). The disk is a 40 KiB tmpfs, so the test needs root (CI runs as root).
TEST_F(MpiTrain, AFullDiskEndsTheJobWithOneLine) {
  const fs::path disk = file("disk");
  fs::create_directories(disk);
  if (std::system(fmt::format("mount -t tmpfs -o size=40k tmpfs {} 2>/dev/null", disk.string())
                      .c_str()) != 0) {
    GTEST_SKIP() << "mounting a small tmpfs needs root";
  }
  for (const int ranks : {2, 3}) {
    const auto run = zerolab_mpi(
        ranks, fmt::format("train --backend mpi --stage 1 --layers 3 --width 64 --in 5 --classes 4 "
                           "--steps 4 --micro-batch 3 --quiet --checkpoint-every 1 "
                           "--checkpoint-dir {}/ck{}",
                           disk.string(), ranks));
    EXPECT_EQ(run.exit_code, 1) << run.err;
    std::size_t ours = 0;
    for (std::size_t at = run.err.find("zerolab: "); at != std::string::npos;
         at = run.err.find("zerolab: ", at + 1)) {
      ++ours;
    }
    EXPECT_EQ(ours, 1u) << ranks << " ranks:\n" << run.err;
    EXPECT_NE(run.err.find("No space left on device"), std::string::npos) << run.err;
  }
  EXPECT_EQ(std::system(fmt::format("umount {}", disk.string()).c_str()), 0);
}

TEST_F(MpiTrain, SimOnlyFlagsAndBadValuesAreOneLineErrors) {
  const std::pair<std::string, std::string> cases[] = {
      {"--backend mpi --stage 1 --inject-fault rank=1,at=all_reduce:1,kind=throw",
       "--inject-fault is the simulator's"},
      {"--backend mpi --what-if-world 8", "--trace and --what-if-world need every rank's"},
      {"--backend mpi --trace " + file("t.json").string(), "--trace and --what-if-world"},
      {"--backend mpi --save-data " + file("d.st").string(), "--save-data needs every rank's"},
      {"--backend mpi --engine reference", "--backend mpi needs a distributed engine"},
      {"--backend mpi --accelerator cpu-detached", "--backend mpi runs on the CPU"},
      {"--mpi-reduce native", "--mpi-reduce needs --backend mpi"},
      {"--backend mpi --mpi-reduce fastest", "--mpi-reduce"},
      {"--backend gloo", "--backend"},
  };
  for (const auto& [args, message] : cases) {
    const auto run = zerolab_singleton("train " + args + " " + kSmall);
    EXPECT_NE(run.exit_code, 0) << args;
    EXPECT_NE(run.err.find(message), std::string::npos) << args << "\n" << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << args << "\n" << run.err;
  }
}

}  // namespace
}  // namespace zl
