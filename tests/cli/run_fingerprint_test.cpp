// run_fingerprint_test.cpp — what the mpi backend compares before the first step: the run each
// process parsed from its own flags, field by field, and the one-line verdict naming the first
// field that differs and which ranks hold which value.
#include "run/run_fingerprint.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/train_command.hpp"

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
  for (const std::vector<std::string>& flags :
       std::vector<std::vector<std::string>>{{"--seed", "4"},
                                             {"--micro-batch", "5"},
                                             {"--bf16"},
                                             {"--lr-schedule", "cosine"},
                                             {"--overlap-comm"},
                                             {"--model", "gpt"}}) {
    EXPECT_TRUE(fingerprint_mismatch({base, fingerprint_of(flags)})) << flags.front();
  }
}

}  // namespace
}  // namespace zl
