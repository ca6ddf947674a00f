// mpi_comm_test.cpp — MpiComm under mpirun: every collective, dtype and op against the answer key
// (mpi_collectives_check), and a rank that dies or throws mid-run ends the whole job, naming the
// rank, within a time limit (mpi_rank_failure).
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include "mpi/mpi_launch.hpp"
#include "support/command.hpp"

namespace zl {
namespace {

// Far above the second a failed job takes to end; `timeout` makes a hang a failure, not a stall.
constexpr int kJobLimitSeconds = 60;

CommandResult launch(int ranks, const std::string& program_and_args) {
  return run_command(
      fmt::format("timeout {} {}{}", kJobLimitSeconds, test::mpirun(ranks), program_and_args));
}

TEST(MpiCollectives, EveryDtypeAndOpMatchesTheAnswerKeyOnFourRanks) {
  const auto run = launch(4, ZL_COLLECTIVES_CHECK);
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("all collectives OK"), std::string::npos) << run.out << run.err;
  EXPECT_EQ(run.out.find("NOT OK"), std::string::npos) << run.out;
}

TEST(MpiCollectives, EveryDtypeAndOpMatchesTheAnswerKeyOnThreeRanks) {
  const auto run = launch(3, ZL_COLLECTIVES_CHECK);  // counts 1000 and 4099 do not divide by 3
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("all collectives OK"), std::string::npos) << run.out << run.err;
}

TEST(MpiFailure, AKilledRankEndsTheJobNamingTheRank) {
  const auto start = std::chrono::steady_clock::now();
  const auto run = launch(4, fmt::format("{} kill", ZL_RANK_FAILURE));
  const auto seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.exit_code, 124) << "the job hung until timeout killed it";
  EXPECT_LT(seconds, kJobLimitSeconds);
  const std::string output = run.out + run.err;
  EXPECT_NE(output.find("rank 2"), std::string::npos) << output;
  EXPECT_EQ(output.find("the failure never came"), std::string::npos) << output;
}

TEST(MpiFailure, AThrowingRankAbortsTheJobWithItsMessage) {
  const auto run = launch(4, fmt::format("{} throw", ZL_RANK_FAILURE));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.exit_code, 124) << "the job hung until timeout killed it";
  EXPECT_NE(run.err.find("zerolab: error: rank 2: collective #50 failed on purpose"),
            std::string::npos)
      << run.out << run.err;
}

// Rank 2 makes an all_gather where the others make their 51st all_reduce: every rank stops at
// that call naming both, as on the sim, instead of a crash or a hang inside MPI.
TEST(MpiFailure, RanksOnDifferentCodePathsFailNamingTheCall) {
  const auto run = launch(4, fmt::format("{} diverge", ZL_RANK_FAILURE));
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.exit_code, 124) << "the job hung until timeout killed it";
  EXPECT_NE(run.err.find("collective mismatch at call #51: rank 0 called all_reduce(fp32, 1000 "
                         "elems, max) but rank 2 called all_gather(fp32, 1000 elems)"),
            std::string::npos)
      << run.out << run.err;
}

// Rank 2 stops calling: the others give up after the 2 s collective timeout, naming the call,
// and their roll call (up to 2 s more) names rank 2 as the one that does not answer.
TEST(MpiFailure, AStalledRankEndsTheJobAfterTheCollectiveTimeout) {
  const auto start = std::chrono::steady_clock::now();
  const auto run = launch(4, fmt::format("{} stall", ZL_RANK_FAILURE));
  const auto seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_NE(run.exit_code, 0);
  EXPECT_NE(run.exit_code, 124) << "the job hung until timeout killed it";
  EXPECT_LT(seconds, kJobLimitSeconds);
  EXPECT_NE(run.err.find("timeout after 2000 ms"), std::string::npos) << run.out << run.err;
  EXPECT_NE(run.err.find("waits in call #51 all_reduce(fp32, 1000 elems, max); rank 2 does not "
                         "answer within 2000 ms (unreachable, stuck or gone)"),
            std::string::npos)
      << run.out << run.err;
}

}  // namespace
}  // namespace zl
