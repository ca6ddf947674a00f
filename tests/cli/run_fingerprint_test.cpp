// run_fingerprint_test.cpp — what the mpi and nccl backends compare before the first step: the run
// each process parsed from its own flags, field by field, the one-line verdict naming the first
// field that differs and which ranks hold which value, and rank 0's settlement that hands every
// rank its run id or that verdict.
#include "run/run_fingerprint.hpp"

#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "cli/train_command.hpp"
#include "core/error.hpp"

namespace zl {
namespace {

// The encoded fingerprint of the run `zerolab train <args>` asks for.
std::string fingerprint_of(const std::vector<std::string>& args) {
  RunPlan plan;
  plan.config = parse_train_args(args).config;
  return encode_fingerprint(run_fingerprint(plan));
}

TEST(RunFingerprint, EqualRunsAgree) {
  const std::string one = fingerprint_of({"--stage", "2", "--lr", "0.01"});
  EXPECT_FALSE(fingerprint_mismatch({one, one, one}));
  EXPECT_FALSE(fingerprint_mismatch({}));
}

TEST(RunFingerprint, TheFirstDifferingFieldIsNamedWithItsRanks) {
  const std::string base = fingerprint_of({"--lr", "0.01"});
  const std::string other = fingerprint_of({"--lr", "0.02"});
  EXPECT_EQ(fingerprint_mismatch({base, other, base}),
            "the ranks disagree on --lr: ranks 0, 2 \"0.01\"; rank 1 \"0.02\": start every rank "
            "with the same flags and files");
  // Two differences: the earlier field in the fingerprint's order is the one named.
  const std::string two = fingerprint_of({"--lr", "0.02", "--stage", "3"});
  EXPECT_NE(fingerprint_mismatch({base, two})->find("disagree on --engine"), std::string::npos);
  // Each flag alone, against the defaults, is named as the field that differs.
  const std::string defaults = fingerprint_of({});
  const std::pair<std::vector<std::string>, std::string> cases[] = {
      {{"--seed", "4"}, "--seed"},
      {{"--micro-batch", "5"}, "--micro-batch"},
      {{"--bf16"}, "--precision"},
      {{"--lr-schedule", "cosine"}, "--lr-schedule"},
      {{"--overlap-comm"}, "the features"},
      {{"--model", "gpt"}, "--model"},
      {{"--steps", "11"}, "--steps"},
      {{"--beta2", "0.95"}, "--beta2"},
      {{"--gpus-per-node", "1"}, "--gpus-per-node"}};
  for (const auto& [flags, field] : cases) {
    const auto mismatch = fingerprint_mismatch({defaults, fingerprint_of(flags)});
    ASSERT_TRUE(mismatch) << flags.front();
    EXPECT_NE(mismatch->find("disagree on " + field + ":"), std::string::npos) << *mismatch;
  }
}

// On nccl, ZL_COLLECTIVE_CHECKS is a field: a rank that checks every call would wait in a check
// the others never make. The sim and MPI always check, so there the variable is not compared.
TEST(RunFingerprint, CollectiveChecksAreAFieldOnNccl) {
  const char* before = std::getenv("ZL_COLLECTIVE_CHECKS");
  const std::string saved = before != nullptr ? before : "";
  const auto fingerprint_with = [](const char* checks, Backend backend) {
    if (checks != nullptr) {
      ::setenv("ZL_COLLECTIVE_CHECKS", checks, 1);
    } else {
      ::unsetenv("ZL_COLLECTIVE_CHECKS");
    }
    RunPlan plan;
    plan.config.backend = backend;
    return encode_fingerprint(run_fingerprint(plan));
  };
  const std::string off = fingerprint_with(nullptr, Backend::Nccl);
  EXPECT_EQ(fingerprint_with("0", Backend::Nccl), off);
  EXPECT_EQ(fingerprint_with("", Backend::Nccl), off);
  const std::string on = fingerprint_with("1", Backend::Nccl);
  EXPECT_EQ(fingerprint_mismatch({on, off, on}),
            "the ranks disagree on the environment variable ZL_COLLECTIVE_CHECKS: rank 1 \"off\"; "
            "ranks 0, 2 \"on\": start every rank with the same flags and files");
  // A value NcclComm would refuse is compared as it is set.
  EXPECT_NE(
      fingerprint_mismatch({on, fingerprint_with("yes", Backend::Nccl)})->find("rank 1 \"yes\""),
      std::string::npos);
  EXPECT_EQ(fingerprint_with("1", Backend::Mpi), fingerprint_with(nullptr, Backend::Mpi));
  if (before != nullptr) {
    ::setenv("ZL_COLLECTIVE_CHECKS", saved.c_str(), 1);
  } else {
    ::unsetenv("ZL_COLLECTIVE_CHECKS");
  }
}

TEST(RunFingerprint, RankZeroSettlesTheRunIdOrTheMismatch) {
  const std::string id = "0123456789abcdef0123456789abcdef";
  const std::string base = fingerprint_of({"--lr", "0.01"});
  EXPECT_EQ(agreed_run_id(settle_run({base, base}, id)), id);
  EXPECT_EQ(agreed_run_id(settle_run({base}, id)), id);
  const std::string other = fingerprint_of({"--lr", "0.02"});
  try {
    agreed_run_id(settle_run({base, other}, id));
    ADD_FAILURE() << "ranks that disagree got a run id";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()), *fingerprint_mismatch({base, other}));
  }
  EXPECT_THROW(agreed_run_id("no newline"), Error);
}

// Sets one environment variable for the scope, restoring it after.
class ScopedVariable {
 public:
  ScopedVariable(const char* name, const char* value) : name_(name) {
    const char* before = std::getenv(name);
    had_ = before != nullptr;
    if (had_) saved_ = before;
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~ScopedVariable() {
    if (had_) {
      ::setenv(name_, saved_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedVariable(const ScopedVariable&) = delete;
  ScopedVariable& operator=(const ScopedVariable&) = delete;

 private:
  const char* name_;
  bool had_ = false;
  std::string saved_;
};

// The process backends take --gpus-per-node from the launcher: mpirun's local size, else
// torchrun's LOCAL_WORLD_SIZE; the sim from the flag alone. A bad value is named.
TEST(RunFingerprint, TheLaunchersRanksANodeAreTheProcessBackendsDefault) {
  ScopedVariable mpirun("OMPI_COMM_WORLD_SIZE", nullptr);
  ScopedVariable mpirun_local("OMPI_COMM_WORLD_LOCAL_SIZE", nullptr);
  ScopedVariable torchrun_local("LOCAL_WORLD_SIZE", "4");
  EXPECT_EQ(launched_gpus_per_node(Backend::Nccl), 4);
  EXPECT_EQ(launched_gpus_per_node(Backend::Mpi), 4);
  EXPECT_EQ(launched_gpus_per_node(Backend::Sim), std::nullopt);
  {
    ScopedVariable size("OMPI_COMM_WORLD_SIZE", "16");
    ScopedVariable local("OMPI_COMM_WORLD_LOCAL_SIZE", "8");
    EXPECT_EQ(launched_gpus_per_node(Backend::Mpi), 8);  // under mpirun, mpirun's count
  }
  ScopedVariable bad("LOCAL_WORLD_SIZE", "four");
  try {
    launched_gpus_per_node(Backend::Nccl);
    FAIL() << "LOCAL_WORLD_SIZE=four was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("LOCAL_WORLD_SIZE=four is not a number of ranks"),
              std::string::npos)
        << e.what();
  }
  ScopedVariable none("LOCAL_WORLD_SIZE", nullptr);
  EXPECT_EQ(launched_gpus_per_node(Backend::Nccl), std::nullopt);
}

}  // namespace
}  // namespace zl
