// nccl_bootstrap_agreement_test.cpp — what the NCCL bootstrap settles besides the id, with no GPU:
// every rank's run fingerprint reaches rank 0 over the bootstrap's own channel (TCP between two
// processes, or the shared id file), and every rank receives rank 0's settlement: the run id when
// the runs agree, the one-line mismatch naming the first differing field when they do not; and the
// ZL_COLLECTIVE_CHECKS switch of NcclComm's per-call check.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "comm/nccl/nccl_bootstrap.hpp"
#include "comm/nccl/nccl_comm.hpp"
#include "core/error.hpp"
#include "run/run_fingerprint.hpp"

namespace zl {
namespace {

constexpr auto kTimeout = std::chrono::seconds(30);
const std::string kRunId = "00112233445566778899aabbccddeeff";

// The fingerprint of a run whose only setting is `lr`.
std::string fingerprint_with_lr(const std::string& lr) {
  return encode_fingerprint({{"--model", "mlp"}, {"--lr", lr}});
}

// The agreement launch_on_nccl makes: this rank's fingerprint, settled by run_fingerprint's
// comparison with rank 0's run id.
BootstrapAgreement agreement_for(const std::string& fingerprint) {
  return {.payload = fingerprint, .settle = [](const std::vector<std::string>& fingerprints) {
            return settle_run(fingerprints, kRunId);
          }};
}

// What agreed_run_id makes of `settled`: the run id, or the error's message.
std::string verdict(const std::string& settled) {
  try {
    return agreed_run_id(settled);
  } catch (const Error& error) {
    return error.what();
  }
}

// Rank 1 in a child process, rank 0 here, over TCP on localhost; returns rank 0's verdict and
// checks that the child reached the same one (its exit status says whether it did).
std::string settle_over_tcp(const std::string& rank0_lr, const std::string& rank1_lr, int port) {
  const std::string expected =
      verdict(settle_run({fingerprint_with_lr(rank0_lr), fingerprint_with_lr(rank1_lr)}, kRunId));
  const pid_t child = ::fork();
  if (child == 0) {
    const SettledId got = nccl_unique_id_over_tcp({1, 2, 1}, "127.0.0.1", port, kTimeout,
                                                  agreement_for(fingerprint_with_lr(rank1_lr)));
    std::_Exit(verdict(got.settled) == expected ? 0 : 1);
  }
  const SettledId got = nccl_unique_id_over_tcp({0, 2, 0}, "127.0.0.1", port, kTimeout,
                                                agreement_for(fingerprint_with_lr(rank0_lr)));
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "rank 1 settled otherwise";
  EXPECT_EQ(verdict(got.settled), expected);
  return verdict(got.settled);
}

TEST(NcclBootstrapAgreement, TwoProcessesOverTcpTakeRankZerosRunId) {
  const int port = 20000 + static_cast<int>((::getpid() + 7) % 20000);
  EXPECT_EQ(settle_over_tcp("0.01", "0.01", port), kRunId);
}

TEST(NcclBootstrapAgreement, TwoProcessesOverTcpThatDisagreeGetTheMismatch) {
  const int port = 20000 + static_cast<int>((::getpid() + 13) % 20000);
  EXPECT_EQ(settle_over_tcp("0.01", "0.02", port),
            "the ranks disagree on --lr: rank 0 \"0.01\"; rank 1 \"0.02\": start every rank with "
            "the same flags and files");
}

TEST(NcclBootstrapAgreement, TheIdFileCarriesTheSettlementToo) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("zerolab_nccl_agree_test." + std::to_string(::getpid()));
  std::filesystem::remove(path);
  std::vector<SettledId> got(3);
  std::vector<std::thread> ranks;
  for (int r = 1; r < 3; ++r) {
    ranks.emplace_back([&, r] {
      got[static_cast<std::size_t>(r)] = nccl_unique_id_from_file(
          {r, 3, r}, path, kTimeout, agreement_for(fingerprint_with_lr(r == 2 ? "0.5" : "0.01")));
    });
  }
  got[0] = nccl_unique_id_from_file({0, 3, 0}, path, kTimeout,
                                    agreement_for(fingerprint_with_lr("0.01")));
  for (auto& rank : ranks) rank.join();
  for (const SettledId& settled : got) {
    EXPECT_EQ(std::string(settled.id.internal, sizeof(settled.id.internal)),
              std::string(got[0].id.internal, sizeof(got[0].id.internal)));
    EXPECT_EQ(verdict(settled.settled),
              "the ranks disagree on --lr: ranks 0, 1 \"0.01\"; rank 2 \"0.5\": start every rank "
              "with the same flags and files");
  }
  EXPECT_FALSE(std::filesystem::exists(path.string() + ".rank-1"));  // rank 0 cleans up
  std::filesystem::remove(path);
}

// ZL_COLLECTIVE_CHECKS switches NcclComm's per-call check on with "1" only; anything but 0 or 1
// is a one-line error naming the variable.
TEST(NcclCollectiveChecks, TheSwitchIsOneOrNothing) {
  const char* before = std::getenv("ZL_COLLECTIVE_CHECKS");
  const std::string saved = before != nullptr ? before : "";
  ::unsetenv("ZL_COLLECTIVE_CHECKS");
  EXPECT_FALSE(collective_checks_from_env());
  ::setenv("ZL_COLLECTIVE_CHECKS", "0", 1);
  EXPECT_FALSE(collective_checks_from_env());
  ::setenv("ZL_COLLECTIVE_CHECKS", "1", 1);
  EXPECT_TRUE(collective_checks_from_env());
  ::setenv("ZL_COLLECTIVE_CHECKS", "yes", 1);
  try {
    collective_checks_from_env();
    ADD_FAILURE() << "ZL_COLLECTIVE_CHECKS=yes was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(std::string(error.what()),
              "environment variable ZL_COLLECTIVE_CHECKS=yes is not 0 or 1: set it to 1 to check "
              "every NCCL call across the ranks, or unset it");
  }
  if (before != nullptr) {
    ::setenv("ZL_COLLECTIVE_CHECKS", saved.c_str(), 1);
  } else {
    ::unsetenv("ZL_COLLECTIVE_CHECKS");
  }
}

}  // namespace
}  // namespace zl
