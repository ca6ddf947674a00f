// aio_fallback_cli_test.cpp — the NVMe tier where io_uring is forbidden, as a container's seccomp
// policy may forbid it: zerolab runs under a filter that fails io_uring_setup with ENOSYS. With
// the default --aio-backend auto its swap files move through the pread/pwrite pool, it says so
// once on stderr and trains the same bits; asked for io_uring itself, it stops in one line before
// training and writes nothing. A swap folder on tmpfs, which refuses O_DIRECT, is said once too and
// trains the same bits.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

#include "support/cli_fixture.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;

// The exit status of a child that could not install the filter (a kernel without seccomp).
constexpr int kNoSeccomp = 126;

// The seccomp program: io_uring_setup fails with ENOSYS, every other call is allowed.
void forbid_io_uring() {
  sock_filter program[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (ENOSYS & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog filter{.len = static_cast<unsigned short>(std::size(program)), .filter = program};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      ::syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &filter) != 0) {
    ::_exit(kNoSeccomp);
  }
}

// zerolab with `args`, io_uring forbidden when `no_io_uring`; stdout and stderr through files in
// `dir`.
CommandResult zerolab_in(const fs::path& dir, const std::vector<std::string>& args,
                         bool no_io_uring) {
  const fs::path out = dir / "stdout.txt";
  const fs::path err = dir / "stderr.txt";
  std::vector<std::string> argv_strings{zl::test::zerolab_binary()};
  argv_strings.insert(argv_strings.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& arg : argv_strings) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t child = ::fork();
  if (child == 0) {
    const int out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out_fd < 0 || err_fd < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) ::_exit(125);
    if (no_io_uring) forbid_io_uring();
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
}

// How many times `text` holds `part`.
int count_of(const std::string& text, const std::string& part) {
  int count = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

class AioFallback : public zl::test::CliTest {
 protected:
  // ZeRO-3 with the optimizer and the parameters on the NVMe tier in `swap`, 3 steps.
  std::vector<std::string> nvme_run(const fs::path& swap, const fs::path& final_file) const {
    return {"train",
            "--stage",
            "3",
            "--world",
            "2",
            "--steps",
            "3",
            "--offload-optimizer",
            "--nvme-path",
            swap.string(),
            "--offload-param",
            "--param-nvme-path",
            swap.string(),
            "--save-final",
            final_file.string(),
            "--quiet"};
  }
};

TEST_F(AioFallback, WithoutIoUringTheSwapFilesMoveByThreadsSaidOnceAndTrainTheSameBits) {
  fs::create_directories(dir_ / "swap");
  const CommandResult usual = zerolab_in(dir_, nvme_run(dir_ / "swap", dir_ / "usual.st"), false);
  ASSERT_EQ(usual.exit_code, 0) << usual.err;
  const CommandResult fallback =
      zerolab_in(dir_, nvme_run(dir_ / "swap", dir_ / "fallback.st"), true);
  if (fallback.exit_code == kNoSeccomp && fallback.err.empty()) GTEST_SKIP() << "no seccomp here";
  ASSERT_EQ(fallback.exit_code, 0) << fallback.err;
  EXPECT_EQ(count_of(fallback.err,
                     "zerolab: io_uring is not available here; swap files move "
                     "their blocks by a pool of pread/pwrite threads"),
            1)
      << fallback.err;
  EXPECT_EQ(slurp(dir_ / "fallback.st"), slurp(dir_ / "usual.st"));
}

TEST_F(AioFallback, AskedForIoUringWhereItIsForbiddenStopsInOneLineAndWritesNothing) {
  fs::create_directories(dir_ / "swap");
  std::vector<std::string> args = nvme_run(dir_ / "swap", dir_ / "never.st");
  args.insert(args.end(), {"--aio-backend", "io_uring"});
  const CommandResult run = zerolab_in(dir_, args, true);
  if (run.exit_code == kNoSeccomp && run.err.empty()) GTEST_SKIP() << "no seccomp here";
  EXPECT_NE(run.exit_code, 0);
  EXPECT_EQ(count_of(run.err, "\n"), 1) << run.err;
  EXPECT_TRUE(
      run.err.starts_with("zerolab: error: aio backend io_uring is not available here "
                          "(Function not implemented): pass --aio-backend threads or auto"))
      << run.err;
  EXPECT_FALSE(fs::exists(dir_ / "never.st"));
  EXPECT_TRUE(fs::is_empty(dir_ / "swap"));
}

TEST_F(AioFallback, ASwapFolderOnTmpfsIsSaidOnceAndTrainsTheSameBits) {
  const fs::path shm = fs::path("/dev/shm") / ("zerolab_swap_" + std::to_string(::getpid()));
  std::error_code made;
  if (!fs::create_directories(shm, made)) GTEST_SKIP() << "no /dev/shm to swap into";
  fs::create_directories(dir_ / "swap");
  const CommandResult usual = zerolab_in(dir_, nvme_run(dir_ / "swap", dir_ / "usual.st"), false);
  const CommandResult tmpfs = zerolab_in(dir_, nvme_run(shm, dir_ / "tmpfs.st"), false);
  fs::remove_all(shm);
  ASSERT_EQ(usual.exit_code, 0) << usual.err;
  ASSERT_EQ(tmpfs.exit_code, 0) << tmpfs.err;
  EXPECT_EQ(slurp(dir_ / "tmpfs.st"), slurp(dir_ / "usual.st"));
  if (count_of(usual.err, "refuses O_DIRECT") > 0) GTEST_SKIP() << "the test folder refuses it too";
  if (count_of(tmpfs.err, "refuses O_DIRECT") == 0) {
    GTEST_SKIP() << "this kernel's tmpfs takes O_DIRECT (Linux 6.6 and later)";
  }
  EXPECT_EQ(count_of(tmpfs.err,
                     "refuses O_DIRECT (tmpfs?): its swap files go through the page "
                     "cache"),
            1)
      << tmpfs.err;
}

}  // namespace
}  // namespace zl
