// grader_test.cpp — the exercises' grader, proven: it passes zerolab's own engines and the solved
// exercises, tells a learner which TODO is next in each untouched skeleton, and fails each
// planted bug with a counterexample that names the mistake (the stage, the smallest world that
// shows it, and what differs).
#include <gtest/gtest.h>

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

TEST(ExerciseGrader, PassesZerolabsEngines) {
  const CommandResult run = grade("exercise_grader", "--engines zerolab --cases 25");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  for (const char* stage : {"ddp: OK", "zero1: OK", "zero2: OK", "zero3: OK"}) {
    EXPECT_TRUE(has(run.out, stage)) << stage << "\n" << run.out;
  }
}

TEST(ExerciseGrader, PassesTheSolvedExercises) {
  const CommandResult run = grade("grader_solutions", "--cases 25");
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  for (const char* stage : {"ddp: OK", "zero1: OK", "zero2: OK", "zero3: OK"}) {
    EXPECT_TRUE(has(run.out, stage)) << stage << "\n" << run.out;
  }
}

TEST(ExerciseGrader, SaysWhichTodoIsNextInEachSkeleton) {
  const CommandResult run = grade("exercise_grader", "");
  EXPECT_EQ(run.exit_code, 1) << run.out << run.err;
  for (const char* next :
       {"ddp: NOT DONE: the run failed: rank ", "ddp.cpp TODO 1 is not written yet: all_reduce",
        "zero1: NOT DONE: the run failed: rank ", "zero1.cpp TODO 1 is not written yet",
        "zero2: NOT DONE: the run failed: rank ", "zero2.cpp TODO 1 is not written yet",
        "zero3: NOT DONE: the run failed: rank ", "zero3.cpp TODO 1 is not written yet"}) {
    EXPECT_TRUE(has(run.out, next)) << next << "\n" << run.out;
  }
}

// A bug must fail its stage with a shrunk counterexample whose words name the mistake, and
// leave the other stages passing.
struct Planted {
  const char* bug;
  const char* stage;
  std::vector<const char*> says;
};

class PlantedBug : public testing::TestWithParam<Planted> {};

TEST_P(PlantedBug, FailsItsStageWithACounterexampleNamingTheMistake) {
  const Planted& planted = GetParam();
  const CommandResult run = grade(std::string("grader_") + planted.bug, "--cases 60");
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
                {"the input of reduce_scatter", "was freed or changed before its wait()"}}),
    [](const testing::TestParamInfo<Planted>& info) { return std::string(info.param.bug); });

}  // namespace
