// lessons_test.cpp — runs each lesson binary at its default sizes straight through (--no-pause) and
// stepping (--step with Enter from a file), and checks its exit code and the numbers and claims it
// prints.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "lesson_runner.hpp"

namespace {

using zl::lessons_test::column;
using zl::lessons_test::kReferenceClaim;
using zl::lessons_test::run_lesson;

namespace fs = std::filesystem;

TEST(Lessons, MemoryMathPrintsThePaperNumbersAndChecksTheClosedForms) {
  const auto run = run_lesson("00_memory_math", "--no-pause");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("112 / 38.5 / 26.25 / 14 GB, the expected"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Ψ = 124,439,808, the published 124,439,808"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("Every table above matches the closed forms"), std::string::npos)
      << run.out;
  // The fp32 table: stage 1 is 8Ψ + 8Ψ/N = 63 GB for 7B on 8 GPUs, with no master copy.
  EXPECT_TRUE(std::regex_search(run.out, std::regex(R"(\n1 +28 +28 +0 +7 +63 )"))) << run.out;
  // Mixed precision's optimizer term is the fp32 master (4Ψ = 28 GB) and Adam (8Ψ = 56 GB).
  EXPECT_TRUE(std::regex_search(run.out, std::regex(R"(\n0 \(DDP\) +14 +14 +28 +56 +112 )")))
      << run.out;
}

TEST(Lessons, DdpShowsEveryRankHoldingTheSameBytes) {
  const auto run = run_lesson("01_ddp", "--no-pause");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("Every rank holds the same bytes of every category: yes"),
            std::string::npos);
  EXPECT_NE(run.out.find("3 of the 4 copies are redundant"), std::string::npos);
  EXPECT_NE(run.out.find("4Ψ + 4Ψ + 8Ψ with Ψ = 6,400"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find("DIFFERS"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find(kReferenceClaim), std::string::npos) << run.out;
}

TEST(Lessons, Zero1ShowsShardsAndTheSameTrafficAsDdp) {
  const auto run = run_lesson("02_zero1", "--no-pause");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  // Units of 1,088 and 4,160 elements pad to 1,280 and 4,352 at W = 4: padding is a detail.
  EXPECT_NE(run.out.find("layers.0: numel 1088, padded 1280, shard S = 320"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("rank 3 owns [960, 1280): 128 real elements, 192 of padding"),
            std::string::npos);
  EXPECT_NE(run.out.find("Padding: 576 of 9,984 elements (5.8%)"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("ZeRO-1 179,712 bytes, DDP 179,712 bytes: the same"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("3Ψ(N-1)/N, 1.5x as much"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find(kReferenceClaim), std::string::npos) << run.out;
}

TEST(Lessons, Zero1PrintsTableOnlyWhereTheBytesChange) {
  const auto run = run_lesson("02_zero1", "--no-pause");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  // ZeRO-1 allocates everything once: after forward, each phase's bytes are the previous ones.
  for (const char* unchanged : {"held after forward u2", "held after backward u0",
                                "held after reduce_scatter u2", "held after update"}) {
    EXPECT_NE(run.out.find(std::string("Bytes: every rank holds exactly what it ") + unchanged),
              std::string::npos)
        << unchanged << "\n"
        << run.out;
  }
}

TEST(Lessons, Zero1OnTheToyShowsPaddingAsMostOfTheShards) {
  const auto run = run_lesson("02_zero1", "--world 2 --layers 2 --width 3 --in 2 --classes 2");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("rank 1 owns [64, 128): 0 real elements, 64 of padding"),
            std::string::npos)
      << run.out;
}

TEST(Lessons, Zero2GradientMemoryFallsThroughBackward) {
  const auto run = run_lesson("03_zero2", "--no-pause");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  // Rank 0's grads bytes at backward u2, reduce_scatter u2, ..., update: never rising, and
  // ending at the own shards alone (9,984 bytes of 4-byte gradients over 4 ranks).
  const auto grads = column(run.out, "backward|reduce_scatter|update");
  ASSERT_EQ(grads.size(), 7u) << run.out;
  for (std::size_t i = 1; i < grads.size(); ++i) EXPECT_LE(grads[i], grads[i - 1]) << "row " << i;
  EXPECT_LT(grads.back(), grads.front());
  EXPECT_EQ(grads.back(), 9984);
  // The backward stop's table is taken once the last full gradient is freed, as its sentence
  // says: the own shards alone, not the 15,104 bytes of the moment reduce_scatter u0 is issued.
  EXPECT_TRUE(std::regex_search(
      run.out, std::regex(R"(as update begins:\nrank \(bytes\)[^\n]*\n +0 +9984 )")))
      << run.out;
  // Sharding the gradients costs no traffic: 2Ψ(N-1)/N, DDP's all-reduce volume.
  EXPECT_NE(run.out.find("ZeRO-2 179,712 bytes, DDP 179,712 bytes: the same"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("DDP and ZeRO-1 hold every unit's full gradient through backward: 39,936"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find(kReferenceClaim), std::string::npos) << run.out;
}

TEST(Lessons, Zero3GathersUpAndDownAndCostsOneAndAHalfDdp) {
  const auto run = run_lesson("04_zero3", "--no-pause");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  // Gathered bytes at each gather, forward pass then backward pass: they rise and fall, one
  // unit at a time, never the whole model (6,400 padded elements, 25,600 bytes).
  const auto gathered = column(run.out, "gather");
  ASSERT_EQ(gathered.size(), 6u) << run.out;
  bool rises = false;
  bool falls = false;
  for (std::size_t i = 1; i < gathered.size(); ++i) {
    rises = rises || gathered[i] > gathered[i - 1];
    falls = falls || gathered[i] < gathered[i - 1];
  }
  EXPECT_TRUE(rises && falls) << run.out;
  for (const auto bytes : gathered) EXPECT_LT(bytes, 25600);
  // After backward: nothing gathered and only the gradient shards (6,400 / 4 ranks x 4 bytes).
  EXPECT_TRUE(std::regex_search(
      run.out, std::regex(R"(as update begins:\nrank \(bytes\)[^\n]*\n +0 +0 +6400 +6400 )")))
      << run.out;
  EXPECT_NE(run.out.find("ZeRO-3 / DDP = 172,800 / 115,200 = 1.50 (exactly 1.5x)"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find(kReferenceClaim), std::string::npos) << run.out;
}

TEST(Lessons, OverlapHidesCommunicationAndTheReplayIsDeterministic) {
  const auto run = run_lesson("05_overlap", "--no-pause");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("ok: DDP with overlap"), std::string::npos) << run.out;
  // ZeRO-1 with overlap within 10% of DDP (with overlap), as in the published comparison.
  EXPECT_NE(run.out.find("ok: ZeRO-1 with overlap"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("is close to DDP"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("ok: overlap lowers the exposed comm of every stage"), std::string::npos)
      << run.out;
  // Modelled compute: 4 Linear layers of 512 x 512 on 128 rows are 4 * 2 * 128 * 512 * 512 FLOPs
  // forward and twice that backward, 805.3 MFLOP at 1 TFLOP/s: 0.8053 ms in every run.
  EXPECT_NE(run.out.find("DDP                        1.0704     0.8053"), std::string::npos)
      << run.out;
  // The ring all-reduce on 4 ranks: 2(N-1) = 6 steps, then every rank holds every chunk's sum
  // (rank r's chunk c starts as r+1+10c: 10 + 40c).
  EXPECT_NE(run.out.find("step 6 of 6 (all-gather"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("rank 3         10       50       90      130\n"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("ok: each rank sent 6 chunks of S/N"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("algbw = S / t"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("busbw = algbw x 2(N-1)/N"), std::string::npos) << run.out;
  // The timelines have a time axis: ZeRO-3 without prefetch is the longest step, 1.365 ms.
  EXPECT_NE(run.out.find("(1.365 ms at the right edge)"), std::string::npos) << run.out;
  // Replays of recorded call sequences with modelled compute give the same numbers every time.
  EXPECT_EQ(run_lesson("05_overlap", "--no-pause").out, run.out);
}

// Lesson 11: the master and Adam leave the device for host memory and then the disk, the same
// bytes in each place, ZeRO-3's parameter shards follow them to the disk through five swap buffers
// of the largest shard (5 x 1,088 bf16 elements in host memory), and the real-scale node
// fits 4x the ZeRO-3 model either way.
TEST(Lessons, InfinityMovesTheOptimizerStateToTheDisk) {
  const auto run = run_lesson("11_infinity", "--no-pause");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  for (const char* row : {"on the device           39,936             0             0",
                          "in host memory           9,984        29,952             0",
                          "on NVMe                  9,984             0        29,952",
                          "both on NVMe             4,992        10,880        34,944"}) {
    EXPECT_NE(run.out.find(row), std::string::npos) << row << "\n" << run.out;
  }
  EXPECT_NE(run.out.find("the optimizer on NVMe           128.0B (4.0x): device 32.00 GB, host "
                         "0.00 GB, disk 96.00 GB"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("ok: the four placements train the same bits"), std::string::npos)
      << run.out;
}

TEST(Lessons, ActivationsAreMeasuredCheckpointedAndLinearInTheContext) {
  const auto run = run_lesson("10_activations", "--no-pause");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  // ZeRO-1 shrinks the model states; the activations are the same bytes at both stages.
  EXPECT_NE(run.out.find("DDP      model states  3,368,960 B   activations  3,495,936 B"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("ZeRO-1   model states  2,105,600 B   activations  3,495,936 B"),
            std::string::npos)
      << run.out;
  // bf16 keeps the products' inputs and outputs in 16 bits: 64% of fp32 for the toy, 57% at
  // GPT-2 124M, where what stays fp32 is a smaller share.
  EXPECT_NE(run.out.find("fp32 activations    5,429,248 B"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("bf16 activations    3,495,936 B   64% of fp32"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("keep 57% of their fp32 activations in bf16\n(estimate), less than this "
                         "toy of 4 blocks"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("is a smaller share there."), std::string::npos) << run.out;
  // Full checkpointing of the 4 blocks: 54% of the activations, the same parameters.
  EXPECT_NE(run.out.find("full              1,886,208       54%   the same bits as without "
                         "checkpointing"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("  32       3,495,936"), std::string::npos) << run.out;
  for (const char* check :
       {"ok: every estimate equals the ledger, kind by kind and for every policy",
        "ok: every checkpointing policy trains the same bits as none",
        "ok: each doubling of T doubles the activations"}) {
    EXPECT_NE(run.out.find(check), std::string::npos) << run.out;
  }
}

TEST(Lessons, OffloadMovesTwelveBytesPerShardElementToTheHost) {
  const auto run = run_lesson("06_offload", "--no-pause");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  // Ψ padded 9,984 at W=4: shard 2,496. On the device ZeRO-2 bf16 holds 2·9,984 params,
  // 2·2,496 grads, 4·2,496 master and 8·2,496 Adam; offload leaves params and grads only.
  EXPECT_NE(run.out.find("ZeRO-2 bf16      device     54,912 B (params 19,968, grads 4,992, "
                         "master 9,984, adam 19,968)   host          0 B"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("+ offload        device     24,960 B (params 19,968, grads 4,992, "
                         "master 0, adam 0)   host     29,952 B"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("4,992 B each way per step"), std::string::npos) << run.out;
  // Device and host are separate tables with separate totals, never added together.
  EXPECT_NE(run.out.find("and its host memory:\nrank (bytes)  host_master  host_optimizer     "
                         "total\n   0                 9984           19968     29952\n"),
            std::string::npos)
      << run.out;
  EXPECT_EQ(run.out.find("host_master  host_optimizer     total\n   0         19968"),
            std::string::npos);
  EXPECT_NE(run.out.find("ok: offloaded and on-device runs are the same bits"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find(kReferenceClaim), std::string::npos) << run.out;
}

TEST(Lessons, CheckpointsMoveBetweenStagesAndWorldSizes) {
  const auto run = run_lesson("07_checkpoints", "--no-pause");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  // One file per rank: units of 624, 2,352 and 294 elements pad to 768 + 2,560 + 512 = 3,840 at
  // W=4; a shard is 960 elements, three fp32 tensors of it per rank plus a safetensors header.
  EXPECT_NE(run.out.find("  rank-3.safetensors"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("ok: resumed at step 3, final parameters bit for bit"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("ok: largest difference"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("6 tensors, 3,270 parameters (padding removed)"), std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("  layers.1.weight    [48, 48]"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("ok: the consolidated file holds the final parameters exactly"),
            std::string::npos)
      << run.out;
}

TEST(Lessons, FaultsBecomeOneErrorNamingTheRankAndTheCall) {
  const auto run = run_lesson("09_faults", "--no-pause");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  EXPECT_NE(run.out.find("error: rank 2: injected fault at all_gather #5 (call #6)\n"),
            std::string::npos)
      << run.out;
  // Which rank notices first depends on the threads; what it reports does not.
  EXPECT_NE(run.out.find("collective mismatch at call #6: rank 0 called all_gather(fp32, 320 "
                         "elems) but rank 2 called reduce_scatter(fp32, 320 elems, avg)"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("then another rank: timeout after 1000 ms: a rank waits in call #6 "
                         "all_gather(fp32, 320 elems); rank 2 never arrived"),
            std::string::npos)
      << run.out;
  std::size_t oks = 0;
  for (std::size_t at = run.out.find("ok: one error naming rank 2"); at != std::string::npos;
       at = run.out.find("ok: one error naming rank 2", at + 1)) {
    ++oks;
  }
  EXPECT_EQ(oks, 3u) << run.out;
}

TEST(Lessons, MixedPrecisionSkipsOverflowsEverywhereAndHalvesTheScale) {
  const auto run = run_lesson("08_mixed_precision", "--no-pause");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  // 2^30 overflows fp16; the scale halves each skipped step until the gradients fit.
  EXPECT_NE(run.out.find("step  1  scale 2^30  grad_norm nan          skipped on every rank"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("updated"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("ok: the first "), std::string::npos) << run.out;
  // NaN against inf, and hysteresis: measured with DeepSpeed's default of 2 as well.
  EXPECT_NE(run.out.find("Why nan and not inf?"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("The same run with hysteresis 2 skips 13 steps (12 above)"),
            std::string::npos)
      << run.out;
  // The bf16 ZeRO-2 ledger. Units 16x64+64 = 1,088, 64x64+64 = 4,160 and 64x8+8 = 520 pad to
  // 1,280 + 4,352 + 768 = 6,400 elements at W=4 (shards of 1,600): 2-byte params whole (12,800),
  // 2-byte grad shards (3,200), a 4-byte master shard (6,400), 8-byte Adam shards (12,800).
  EXPECT_NE(run.out.find("   0             12800      3200      6400      12800     35200"),
            std::string::npos)
      << run.out;
  std::size_t claims = 0;
  for (std::size_t at = run.out.find(kReferenceClaim); at != std::string::npos;
       at = run.out.find(kReferenceClaim, at + 1)) {
    ++claims;
  }
  EXPECT_EQ(claims, 2u) << run.out;
}

class LessonSteps : public ::testing::TestWithParam<const char*> {};

TEST_P(LessonSteps, StepWaitsForEnterReadFromAFile) {
  const fs::path enters =
      fs::temp_directory_path() / ("zerolab_enters_" + std::to_string(::getpid()));
  std::ofstream(enters) << std::string(32, '\n');
  const auto stepped = run_lesson(GetParam(), "--step", enters.string());
  fs::remove(enters);
  ASSERT_EQ(stepped.exit_code, 0) << stepped.out;
  EXPECT_NE(stepped.out.find("[Enter]"), std::string::npos) << stepped.out;
  // Pausing changes nothing but the prompts: the same lesson straight through prints the rest.
  const auto straight = run_lesson(GetParam(), "--no-pause");
  EXPECT_EQ(straight.out.find("[Enter]"), std::string::npos);
  EXPECT_EQ(column(stepped.out, "backward|gather"), column(straight.out, "backward|gather"));
}

TEST_P(LessonSteps, StepAtEndOfInputDoesNotHang) {
  const auto run = run_lesson(GetParam(), "--step");  // stdin is /dev/null
  EXPECT_EQ(run.exit_code, 0) << run.out;
}

// Lesson 12: two nodes of 4 on one NIC. ZeRO-3's bytes all leave the node; hpZ keeps backward's
// gathers inside it and HSDP all but one all-reduce of gradient shards; at real scale one NIC a
// node makes ZeRO++ whole (hpZ with quantized gathers and reduces) the fastest, then hpZ; all
// three train the reference's bits.
TEST(Lessons, NodesShowWhereEachWayOfShardingSendsItsBytes) {
  const auto run = run_lesson("12_nodes", "--no-pause");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  for (const char* row : {"ZeRO-3               0             0       340,392          21,504",
                          "HSDP           270,504        29,952           136          39,936",
                          "hpZ             96,768             0       227,552          32,256"}) {
    EXPECT_NE(run.out.find(row), std::string::npos) << row << "\n" << run.out;
  }
  EXPECT_NE(run.out.find("with 1 NIC a node ZeRO++ is fastest, 2.94x ZeRO-3's speed"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("1                         15.65 ms    19.13 ms    11.16 ms     5.33 ms"),
            std::string::npos)
      << run.out;
  EXPECT_NE(run.out.find("ok: hpZ's bytes inside the node, 96,768, are its backward gathers"),
            std::string::npos)
      << run.out;
  for (const char* claim : {"zero3 on 8 ranks over 3 steps matches the reference bit for bit",
                            "zero3 hsdp, shard groups of 4 on 8 ranks over 3 steps matches",
                            "zero3 hpz, partitions of 4 on 8 ranks over 3 steps matches"}) {
    EXPECT_NE(run.out.find(claim), std::string::npos) << claim << "\n" << run.out;
  }
}

TEST_P(LessonSteps, NoPauseWinsOverStep) {
  const auto run = run_lesson(GetParam(), "--step --no-pause");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_EQ(run.out.find("[Enter]"), std::string::npos);
}

TEST_P(LessonSteps, UnknownFlagFailsInOneLine) {
  const auto run = run_lesson(GetParam(), "--stepp");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.out.find("unknown flag '--stepp'"), std::string::npos) << run.out;
}

INSTANTIATE_TEST_SUITE_P(AllLessons, LessonSteps,
                         ::testing::Values("00_memory_math", "01_ddp", "02_zero1", "03_zero2",
                                           "04_zero3", "05_overlap", "06_offload", "07_checkpoints",
                                           "08_mixed_precision", "09_faults", "10_activations",
                                           "11_infinity", "12_nodes"));

}  // namespace
