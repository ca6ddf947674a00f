// lesson_sizes_test.cpp — the lessons at sizes a learner chooses: every lesson at --world 1, 3,
// 5 and 8 and at other sizes still ends with its checks passing; bad sizes are one-line errors;
// lessons 01-04 print the engines' numbers and 00-06 end at real scale.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>
#include <string>
#include <tuple>

#include "lesson_runner.hpp"

namespace {

using zl::lessons_test::run_lesson;

// Lessons 01-04 print each rank's numbers: its own gradient, the reduce-scatter's inputs and
// average, its shards before and after the update. The averages are recomputed with the engines'
// run_micro_batch and reduce_rank_order, and must give the run's gradient norm bit for bit.
class LessonValues : public ::testing::TestWithParam<const char*> {};

TEST_P(LessonValues, ShowTheEnginesNumbers) {
  for (const char* sizes : {"", "--world 3 --width 40 --seed 4", "--bf16 --world 3 --seed 5"}) {
    const auto run = run_lesson(GetParam(), sizes);
    ASSERT_EQ(run.exit_code, 0) << sizes << "\n" << run.out;
    EXPECT_NE(run.out.find("ok: the averaged gradients shown have the run's gradient norm"),
              std::string::npos)
        << run.out;
    const std::string lesson = GetParam();
    if (lesson == "01_ddp" || lesson == "02_zero1") {
      EXPECT_NE(run.out.find("  rank 1 grads  [0, "), std::string::npos) << run.out;
    }
    if (lesson != "01_ddp") {
      EXPECT_NE(run.out.find("    rank 1 receives   ["), std::string::npos) << run.out;
      EXPECT_NE(run.out.find("  rank 2 m            ["), std::string::npos) << run.out;
      // under mixed precision AdamW updates the fp32 master, shown beside the parameters
      EXPECT_EQ(run.out.find("  rank 1 master now   [") != std::string::npos,
                std::string(sizes).starts_with("--bf16"))
          << run.out;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Lessons01To04, LessonValues,
                         ::testing::Values("01_ddp", "02_zero1", "03_zero2", "04_zero3"));

// A lesson run at sizes other than its defaults: it must still end with its checks passing.
struct SizedRun {
  const char* lesson;
  const char* flags;
  const char* claim;  // printed only when the run at these sizes passes its checks
};

class LessonSizes : public ::testing::TestWithParam<SizedRun> {};

TEST_P(LessonSizes, EveryCombinationEndsWithItsChecksPassing) {
  const auto run = run_lesson(GetParam().lesson, GetParam().flags);
  ASSERT_EQ(run.exit_code, 0) << GetParam().flags << "\n" << run.out;
  EXPECT_NE(run.out.find(GetParam().claim), std::string::npos) << run.out;
}

INSTANTIATE_TEST_SUITE_P(
    AllLessons, LessonSizes,
    ::testing::Values(
        SizedRun{"00_memory_math", "--world 3 --params 1000",
                 "Ψ = 1,000 on 3 GPUs, mixed, per GPU: 1.6e-05 / 8.008e-06 / 6.676e-06 / 5.344e-06 "
                 "GB\n"},
        SizedRun{"01_ddp", "--world 3 --layers 2 --width 10 --steps 2 --seed 7",
                 "ddp on 3 ranks over 2 steps matches the reference bit for bit"},
        SizedRun{"02_zero1", "--world 5 --in 7 --classes 3 --rows 3 --steps 1",
                 "zero1 on 5 ranks over 1 steps matches the reference bit for bit"},
        SizedRun{"03_zero2", "--world 8 --layers 4 --width 32 --seed 2",
                 "zero2 on 8 ranks over 3 steps matches the reference bit for bit"},
        SizedRun{"04_zero3", "--world 3 --classes 5 --rows 2 --seed 3", "(exactly 1.5x)"},
        SizedRun{"05_overlap", "--world 3 --layers 3 --width 64 --in 64 --classes 64 --rows 16",
                 "ok: every stage trains the same bits with and without overlap"},
        SizedRun{"06_offload", "--world 5 --stage 3 --steps 2",
                 "ok: offloaded and on-device runs are the same bits"},
        SizedRun{"06_offload", "--world 3 --stage 1 --width 40",
                 "ok: offloaded and on-device runs are the same bits"},
        SizedRun{"07_checkpoints", "--world 3 --stage 1 --rows 2 --steps 4",
                 "ok: resumed at step 2, final parameters bit for bit"},
        SizedRun{"08_mixed_precision", "--world 3 --stage 3 --steps 6 --seed 1",
                 "zero3 on 3 ranks over 6 steps matches the reference bit for bit"},
        SizedRun{"09_faults", "--world 5 --rows 2 --seed 4", "ok: one error naming rank 2"},
        SizedRun{"10_activations", "--world 3 --rows 4 --steps 1 --seed 1",
                 "ok: every checkpointing policy trains the same bits as none"},
        SizedRun{"11_infinity", "--world 5 --stage 1 --steps 2",
                 "ok: the three placements train the same bits"},
        SizedRun{"11_infinity", "--world 3 --stage 2 --width 40 --seed 2",
                 "ok: the three placements train the same bits"},
        SizedRun{"12_nodes", "--world 4 --layers 2 --width 32 --seed 2",
                 "zero3 hpz, partitions of 2 on 4 ranks over 3 steps matches the reference"},
        SizedRun{"12_nodes", "--world 6 --rows 3 --steps 2",
                 "zero3 hsdp, shard groups of 3 on 6 ranks over 2 steps matches the reference"}),
    [](const ::testing::TestParamInfo<SizedRun>& info) {
      return std::string(info.param.lesson) + "_" + std::to_string(info.index);
    });

TEST(Lessons, SizesThatCannotWorkAreOneLineErrors) {
  for (const auto& [lesson, flags, says] : {
           std::tuple{"07_checkpoints", "--world 3 --rows 3", "do not split over 2 ranks"},
           std::tuple{"07_checkpoints", "--steps 1", "give --steps 2 or more"},
           std::tuple{"06_offload", "--stage 0", "--stage: Value 0 not in range 1 to 3"},
           std::tuple{"08_mixed_precision", "--stage 4", "--stage: Value 4 not in range 0 to 3"},
           std::tuple{"01_ddp", "--stage 1", "unknown flag '--stage'"},
           std::tuple{"02_zero1", "--steps 0", "--steps: Value 0 not in range 1 to 1000"},
           std::tuple{"01_ddp", "--seed -1", "--seed: Value -1 not in range 0 to 4294967295"},
           std::tuple{"01_ddp", "--width 4096 --layers 16",
                      "would take about 15.1 GB over 4 ranks, more than the 2 GB a lesson allows: "
                      "use a smaller --world, --width, --layers or --rows"},
           std::tuple{"10_activations", "--rows 4096 --world 64",
                      "use a smaller --world or --rows"},
           std::tuple{"12_nodes", "--world 5", "--world 5 is not two nodes: give an even --world"},
           std::tuple{"12_nodes", "--world 2", "--world: Value 2 not in range 4 to 64"},
       }) {
    const auto run = run_lesson(lesson, flags);
    // The zerolab command's rule: a request that cannot work exits 2 (docs/usage.md).
    EXPECT_EQ(run.exit_code, 2) << lesson << " " << flags;
    EXPECT_EQ(std::ranges::count(run.out, '\n'), 1) << run.out;
    EXPECT_NE(run.out.find(says), std::string::npos) << run.out;
  }
}

// Lessons 00-06 end by applying what they showed to GPT-2 124M, 1.5B and a 7B model on 8 and
// 64 GPUs (engines/estimate.hpp, bf16 with an fp32 master and Adam).
class LessonRealScale : public ::testing::TestWithParam<const char*> {};

TEST_P(LessonRealScale, EndsWithRealModelsOnEightAndSixtyFourGpus) {
  const auto run = run_lesson(GetParam(), "");
  ASSERT_EQ(run.exit_code, 0) << run.out;
  for (const char* row : {"GPT-2 124M       124,439,808    8", "GPT-2 1.5B     1,557,611,200   64",
                          "7B (bare Ψ)    7,000,000,000    8", "GPT-2 124M       8",
                          "GPT-2 1.5B      64", "7B (bare Ψ)      8"}) {
    if (run.out.find(row) != std::string::npos) return;
  }
  ADD_FAILURE() << "no real-scale table\n" << run.out;
}

INSTANTIATE_TEST_SUITE_P(Lessons00To06, LessonRealScale,
                         ::testing::Values("00_memory_math", "01_ddp", "02_zero1", "03_zero2",
                                           "04_zero3", "05_overlap", "06_offload"));

TEST(Lessons, RealScaleNumbersAreTheEstimates) {
  // The same numbers as `zerolab estimate --model gpt --n-layer 48 --n-head 25 --n-embd 1600
  // --block-size 1024 --vocab 50257 --world 64`: 24.93 / 6.52 / 3.46 / 0.39 GB (the padding
  // column counts wte's rows past the vocabulary, padded to 50,304, with the units').
  const auto zero3 = run_lesson("04_zero3", "");
  EXPECT_NE(zero3.out.find("GPT-2 1.5B     1,557,611,200   64   0.0165%        24.93         "
                           "6.52         3.46         0.39"),
            std::string::npos)
      << zero3.out;
  // 7B on 8 GPUs: 2 x 7e9 x 7/8 x 2 bytes = 24.5 GB per step, 544.4 ms at 45 GB/s.
  const auto overlap = run_lesson("05_overlap", "");
  EXPECT_NE(overlap.out.find("7B (bare Ψ)      8           24.50       544.4           36.75"),
            std::string::npos)
      << overlap.out;
  // ZeRO-2 offloaded, 7B on 8 GPUs: 2Ψ + 2Ψ/8 on the device, 12Ψ/8 on the host.
  const auto offload = run_lesson("06_offload", "");
  EXPECT_NE(offload.out.find("7B (bare Ψ)      8         26.25         15.75         10.50"),
            std::string::npos)
      << offload.out;
}

class LessonWorlds : public ::testing::TestWithParam<const char*> {};

// What each lesson prints that names the world it ran on ("{}" is the world).
std::string world_named(const std::string& lesson, int world) {
  const std::string w = std::to_string(world);
  if (lesson == "00_memory_math") return "on " + w + " GPUs, mixed, per GPU";
  if (lesson == "07_checkpoints") return "save under zero3 on " + w + " ranks";
  if (lesson == "09_faults") return "ZeRO-3 on " + w + " ranks";
  if (lesson == "10_activations") return "W = " + w + ", bf16";
  return "on " + w + " ranks over";
}

TEST_P(LessonWorlds, RunsAndPassesItsChecksAtOtherWorldSizes) {
  const std::string lesson = GetParam();
  for (const int world : {1, 3, 5, 8}) {
    const auto run = run_lesson(lesson, "--world " + std::to_string(world));
    if (lesson == "09_faults" && world < 3) {  // rank 2 is the faulty one
      EXPECT_EQ(run.exit_code, 2) << run.out;
      EXPECT_NE(run.out.find("--world: Value 1 not in range 3 to 64"), std::string::npos)
          << run.out;
      continue;
    }
    ASSERT_EQ(run.exit_code, 0) << "--world " << world << "\n" << run.out;
    EXPECT_NE(run.out.find(world_named(lesson, world)), std::string::npos)
        << "--world " << world << "\n"
        << run.out;
  }
}

TEST_P(LessonWorlds, BadSizeIsOneLineAndExitTwo) {
  const auto run = run_lesson(GetParam(), "--world 0");
  EXPECT_EQ(run.exit_code, 2) << run.out;
  EXPECT_EQ(std::ranges::count(run.out, '\n'), 1) << run.out;
  EXPECT_NE(run.out.find("--world: Value 0 not in range"), std::string::npos) << run.out;
  const auto word = run_lesson(GetParam(), "--world many");
  EXPECT_EQ(word.exit_code, 2) << word.out;
  EXPECT_EQ(std::ranges::count(word.out, '\n'), 1) << word.out;
}

TEST_P(LessonWorlds, HelpListsTheSizesWithTheirDefaults) {
  const auto run = run_lesson(GetParam(), "--help");
  EXPECT_EQ(run.exit_code, 0) << run.out;
  EXPECT_TRUE(std::regex_search(run.out, std::regex(R"(--world INT:INT in \[[13] - 64\]=[248])")))
      << run.out;
}

INSTANTIATE_TEST_SUITE_P(AllLessons, LessonWorlds,
                         ::testing::Values("00_memory_math", "01_ddp", "02_zero1", "03_zero2",
                                           "04_zero3", "05_overlap", "06_offload", "07_checkpoints",
                                           "08_mixed_precision", "09_faults", "10_activations",
                                           "11_infinity"));

}  // namespace
