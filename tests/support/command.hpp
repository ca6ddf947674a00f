// command.hpp — runs a built binary through the shell for end-to-end tests, capturing its exit
// code, stdout and stderr (through files in a fresh temporary directory, removed afterwards).
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace zl {

/// What a command did.
struct CommandResult {
  int exit_code = -1;  ///< -1 when it did not exit normally (a signal)
  std::string out;
  std::string err;
};

/// The whole content of a file ("" if it cannot be read).
inline std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

/// Runs `command_line` with stdin from `stdin_path`.
inline CommandResult run_command(const std::string& command_line,
                                 const std::string& stdin_path = "/dev/null") {
  static std::atomic<int> counter{0};
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      ("zerolab_cmd_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  std::filesystem::create_directories(dir);
  const std::filesystem::path out = dir / "stdout.txt";
  const std::filesystem::path err = dir / "stderr.txt";
  const std::string shell_line =
      command_line + " <" + stdin_path + " >" + out.string() + " 2>" + err.string();
  const int status = std::system(shell_line.c_str());
  CommandResult result{WIFEXITED(status) ? WEXITSTATUS(status) : -1, slurp(out), slurp(err)};
  std::filesystem::remove_all(dir);
  return result;
}

}  // namespace zl
