// lesson_runner.hpp — runs a lesson binary for the lesson tests and reads columns of what it
// printed.
#pragma once

#include <cstdint>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/command.hpp"
#include "support/test_paths.hpp"

namespace zl::lessons_test {

/// What a lesson run printed and how it exited.
struct LessonRun {
  int exit_code = -1;
  std::string out;  // stdout, then stderr
};

// Runs lessons/lesson_<name> with `args`, stdin from `input` (a path; /dev/null by default).
inline LessonRun run_lesson(const std::string& name, const std::string& args,
                            const std::string& input = "/dev/null") {
  const zl::CommandResult run =
      zl::run_command(std::string(zl::test::lessons_dir()) + "/lesson_" + name + " " + args, input);
  return {run.exit_code, run.out + run.err};
}

// The first number after the event label on each line that starts with one of `labels` (a regex
// alternation such as "backward|reduce_scatter"), in order.
inline std::vector<std::int64_t> column(const std::string& text, const std::string& labels) {
  const std::regex row("^(?:" + labels + ")(?: u[0-9]+)? +([0-9]+)");
  std::vector<std::int64_t> values;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch match;
    if (std::regex_search(line, match, row)) values.push_back(std::stoll(match[1].str()));
  }
  return values;
}

// What matches_reference prints when a run equals the reference.
constexpr auto kReferenceClaim = "matches the reference bit for bit";

}  // namespace zl::lessons_test
