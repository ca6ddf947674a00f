// grader_test.cpp — the exercises' grader, proven: it passes zerolab's own engines and the solved
// exercises, tells a learner which TODO is next in each untouched skeleton, and fails each
// planted bug with a counterexample that names the mistake (the stage, the smallest world that
// shows it, and what differs).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "support/command.hpp"
#include "support/test_paths.hpp"

namespace {

using zl::CommandResult;

CommandResult grade(const std::string& grader, const std::string& flags) {
  return zl::run_command(std::string(zl::test::lessons_dir()) + "/" + grader + " " + flags);
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// Every stage's verdict line starts "<stage>: <verdict>".
void expect_every_stage(const std::string& out, const std::string& verdict) {
  for (const char* stage : {"ddp", "zero1", "zero2", "zero3"}) {
    EXPECT_TRUE(has(out, std::string(stage) + ": " + verdict)) << stage << "\n" << out;
  }
}

TEST(ExerciseGrader, PassesZerolabsEngines) {
  const CommandResult run = grade("exercise_grader", "--engines zerolab --cases 25");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  expect_every_stage(run.out, "OK");
}

TEST(ExerciseGrader, PassesTheSolvedExercises) {
  const CommandResult run = grade("grader_solutions", "--cases 25");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  expect_every_stage(run.out, "OK");
}

TEST(ExerciseGrader, SaysWhichTodoIsNextInEachSkeleton) {
  const CommandResult run = grade("exercise_grader", "");
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  for (const char* next :
       {"ddp: NOT DONE: the run failed: rank ",
        "ddp.cpp TODO 1 is not written yet: every rank's gradient of unit u must become the "
        "average over all ranks",
        "zero1: NOT DONE: the run failed: rank ", "zero1.cpp TODO 1 is not written yet",
        "zero2: NOT DONE: the run failed: rank ", "zero2.cpp TODO 1 is not written yet",
        "zero3: NOT DONE: the run failed: rank ", "zero3.cpp TODO 1 is not written yet"}) {
    EXPECT_TRUE(has(run.out, next)) << next << "\n" << run.out;
  }
  // The idea, not the call: the call waits behind --hint.
  EXPECT_TRUE(has(run.out, "(--hint names the call)")) << run.out;
  EXPECT_FALSE(has(run.out, "The call:")) << run.out;
  EXPECT_FALSE(has(run.out, "all_reduce (avg)")) << run.out;
}

TEST(ExerciseGrader, HintNamesTheCall) {
  const CommandResult run = grade("exercise_grader", "--hint --stage 0");
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  EXPECT_TRUE(has(run.out,
                  "ddp.cpp TODO 1 is not written yet: every rank's gradient of unit u "
                  "must become the average over all ranks, the same on every rank. The "
                  "call: all_reduce (avg) unit u's gradient grads_[u] in place"))
      << run.out;
}

// Level 2 asks for the norm and the update (level2/norm_and_update.cpp): with solved engines, the
// untouched skeleton stops every stage at its first TODO...
TEST(ExerciseGrader, LevelTwoSaysItsFirstTodoInEveryStage) {
  const CommandResult run = grade("grader_level2_skeleton", "");
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  expect_every_stage(run.out, "NOT DONE: the run failed: rank ");
  EXPECT_EQ(std::ranges::count(run.out, '\n'), 4) << run.out;
  EXPECT_TRUE(has(run.out,
                  "norm_and_update.cpp TODO 1 is not written yet: the norm that clipping "
                  "uses is the whole model's"))
      << run.out;
}

// ... and an update that forgets the clipping fails every stage, naming the threshold it passed.
TEST(ExerciseGrader, LevelTwoWithoutClippingFailsEveryStageNamingTheThreshold) {
  const CommandResult run = grade("grader_level2_clip_forgotten", "--cases 60");
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  expect_every_stage(run.out, "FAILED");
  EXPECT_TRUE(has(run.err, "was above the clipping threshold 0.01")) << run.err;
  EXPECT_FALSE(has(run.out + run.err, "RC_FAIL")) << run.err;
}

// A bug must fail its stage with a shrunk counterexample whose words name the mistake, and
// leave the other stages passing.
struct Planted {
  const char* bug;
  const char* stage;
  std::vector<const char*> says;
  const char* flags = "";  // besides --cases 60
};

class PlantedBug : public testing::TestWithParam<Planted> {};

TEST_P(PlantedBug, FailsItsStageWithACounterexampleNamingTheMistake) {
  const Planted& planted = GetParam();
  const CommandResult run =
      grade(std::string("grader_") + planted.bug, std::string("--cases 60 ") + planted.flags);
  // The verdicts go to stdout, RapidCheck's counterexample to stderr.
  const std::string report = run.out + run.err;
  EXPECT_EQ(run.exit_code, 1) << report;
  EXPECT_TRUE(has(run.out, std::string(planted.stage) + ": FAILED")) << report;
  EXPECT_TRUE(has(run.err, "Falsifiable")) << report;
  EXPECT_FALSE(has(report, "RC_FAIL")) << report;
  for (const char* words : planted.says) {
    EXPECT_TRUE(has(report, words)) << words << "\n" << report;
  }
  for (const char* stage : {"ddp", "zero1", "zero2", "zero3"}) {
    if (std::string(stage) == planted.stage) continue;
    EXPECT_TRUE(has(run.out, std::string(stage) + ": OK")) << stage << "\n" << report;
  }
}

INSTANTIATE_TEST_SUITE_P(
    ExerciseGrader, PlantedBug,
    testing::Values(
        Planted{"ddp_accumulation_forgotten",
                "ddp",
                {"the gradient norm is", "accumulation over micro-batches", "accumulation 2"}},
        Planted{
            "zero1_shard_off_by_one",
            "zero1",
            {"after step 1, the last, rank 0 holds, for its next forward, the parameters of unit",
             "'s shard [", "the parameter all_gather of step 1 went wrong", "zero1 at world 2"}},
        Planted{"zero2_all_reduce_for_reduce_scatter",
                "zero2",
                {"rank 0 sent", "bytes by all_reduce where zero2 sends",
                 "reduce-scatter the gradients", "zero2 at world 2"}},
        Planted{"zero2_bucket_freed_before_wait",
                "zero2",
                {"the input of reduce_scatter", "was freed or changed before its wait()"}},
        // The six mistakes learners make most: a norm from the own shard alone, the whole
        // parameter updated, an accumulator never zeroed, gradients averaged over the wrong
        // world, updates gathered to the wrong offsets (the shard one rank off above), a ZeRO-3
        // unit released before backward used it.
        Planted{"zero1_norm_from_own_shard", "zero1", {"own shard alone", "zero1 at world 2"}},
        Planted{
            "zero1_update_whole_parameter",
            "zero1",
            {"the update got", "parameters and", "its own shard under ZeRO", "zero1 at world 2"}},
        Planted{"ddp_accumulator_never_zeroed",
                "ddp",
                {"step 2: the gradient norm is", "carry something over from the step before",
                 "not zeroed", "accumulation 2"}},
        Planted{"zero2_summed_not_averaged",
                "zero2",
                {"as if the gradients were averaged over 1 rank(s) instead of 2",
                 "summed, not averaged", "zero2 at world 2"}},
        // fp32 only: in 16 bits the engines widen the freed parameters before any check can run,
        // a read of freed memory that ASan would stop before the grader could explain it.
        Planted{"zero3_released_before_backward",
                "zero3",
                {"the backward visit of unit", "released before the visit used it",
                 "UnitParams::owned"},
                "--precision fp32"},
        Planted{"zero3_gathered_never_released",
                "zero3",
                {"held", "bytes of gathered parameters where the reference holds",
                 "was not released after its visit"}}),
    [](const testing::TestParamInfo<Planted>& info) { return std::string(info.param.bug); });

}  // namespace
