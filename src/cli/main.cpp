// main.cpp — the zerolab command: parses the subcommand, runs it, and turns every error into one
// line on stderr with a non-zero exit: 2 for usage errors (flags, configs, sizes), 3 for a bad
// input file (data, --init, a checkpoint), 1 for failures while running. Under
// mpirun every process reads the same command line, so only rank 0's process prints what this
// catches, and the other ranks wait before they exit (mpirun ends the whole job at the first
// non-zero exit, which would otherwise race rank 0's line); a rank that fails during training
// prints its own line, naming itself, before it aborts the job (mpi_abort).
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <string_view>
#include <thread>

#include "cli/bench_command.hpp"
#include "cli/consolidate_command.hpp"
#include "cli/estimate_command.hpp"
#include "cli/train_command.hpp"
#include "core/error.hpp"
#include "core/version.hpp"

namespace {

// False in the processes of ranks 1.. of an mpirun job (OpenMPI's OMPI_COMM_WORLD_RANK), whose
// error would repeat rank 0's.
bool prints_errors() {
  const char* rank = std::getenv("OMPI_COMM_WORLD_RANK");
  return rank == nullptr || std::string_view(rank) == "0";
}

// How a rank that does not print ends after an error: it waits, so that rank 0 prints its line
// and exits first and mpirun, ending the job, stops this process too. The wait is bounded, so a
// rank 0 that somehow did not fail cannot leave this one running forever.
int quiet_exit(int exit_code) {
  constexpr auto kRankZeroFirst = std::chrono::seconds(5);
  std::this_thread::sleep_for(kRankZeroFirst);
  return exit_code;
}

// The exit codes of a request that cannot work and of a fault while running (docs/usage.md,
// "Exit codes").
constexpr int kUsageExit = zl::exit_code_of(zl::ErrorKind::Usage);
constexpr int kRuntimeExit = zl::exit_code_of(zl::ErrorKind::Runtime);

// An error's message, each of its lines (a config's problems, say) a "zerolab: error:" line.
void print_error(std::string_view what) {
  std::size_t start = 0;
  while (start <= what.size()) {
    const std::size_t end = std::min(what.find('\n', start), what.size());
    fmt::print(stderr, "zerolab: error: {}\n", what.substr(start, end - start));
    start = end + 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"zerolab: data-parallel training with ZeRO, from DDP to ZeRO-3"};
  app.require_subcommand(1);
  app.set_version_flag("--version",
                       fmt::format("zerolab {} (git {})", zl::version(), zl::git_commit()));
  std::function<int()> run;
  zl::add_train_command(app, run);
  zl::add_estimate_command(app, run);
  zl::add_consolidate_command(app, run);
  zl::add_bench_command(app, run);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() == 0) return app.exit(error);
    if (!prints_errors()) return quiet_exit(kUsageExit);
    fmt::print(
        stderr, "zerolab: error: {}: run 'zerolab {} --help' for the options\n", error.what(),
        app.get_subcommands().empty() ? std::string() : app.get_subcommands().front()->get_name());
    return kUsageExit;
  } catch (const zl::Error& error) {  // a flag's own check, e.g. --stage 4, or a --config file
    if (!prints_errors()) return quiet_exit(kUsageExit);
    print_error(error.what());
    return kUsageExit;
  }
  try {
    return run();
  } catch (const zl::Error& error) {
    const int code = zl::exit_code_of(error.kind());
    if (!prints_errors()) return quiet_exit(code);
    print_error(error.what());
    return code;
  } catch (const std::exception& error) {
    if (!prints_errors()) return quiet_exit(kRuntimeExit);
    print_error(error.what());
    return kRuntimeExit;
  }
}
