// main.cpp — the zerolab command: parses the subcommand, runs it, and turns every error into one
// line on stderr with a non-zero exit (2 for usage errors, 1 for failures while running). Under
// mpirun every process reads the same command line, so only rank 0's process prints what this
// catches, and the other ranks wait before they exit (mpirun ends the whole job at the first
// non-zero exit, which would otherwise race rank 0's line); a rank that fails during training
// prints its own line, naming itself, before it aborts the job (mpi_abort).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

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
    if (!prints_errors()) return quiet_exit(2);
    fmt::print(stderr, "zerolab: {}: run 'zerolab {} --help' for the options\n", error.what(),
               app.get_subcommands().empty() ? std::string() : app.get_subcommands().front()->get_name());
    return 2;
  } catch (const zl::Error& error) {  // a flag's own check, e.g. --stage 4
    if (!prints_errors()) return quiet_exit(2);
    print_error(error.what());
    return 2;
  }
  try {
    return run();
  } catch (const std::exception& error) {
    if (!prints_errors()) return quiet_exit(1);
    print_error(error.what());
    return 1;
  }
}
