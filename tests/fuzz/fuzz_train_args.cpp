// fuzz_train_args.cpp — libFuzzer target for the `zerolab train` flag parser: the input is split
// into arguments at newlines and parsed (and the config validated) as `zerolab train` does,
// without training. Any argv must end in a config or in the errors the command reports in one
// line (CLI::ParseError, zl::Error); never a crash, undefined behaviour or another exception.
#include <CLI/CLI.hpp>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "cli/train_command.hpp"
#include "core/error.hpp"

namespace {

// The input's lines, one argument each (a final newline ends the last one).
std::vector<std::string> arguments_of(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args;
  std::string current;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] != '\n') {
      current.push_back(static_cast<char>(data[i]));
      continue;
    }
    args.push_back(std::move(current));
    current.clear();
  }
  if (!current.empty()) args.push_back(std::move(current));
  return args;
}

void expect_one_line(const zl::Error& error) {
  if (std::strchr(error.what(), '\n') != nullptr) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string> args = arguments_of(data, size);
  try {
    const zl::TrainArgs parsed = zl::parse_train_args(args);
    try {
      zl::validate(parsed.config);
    } catch (const zl::Error& error) {
      expect_one_line(error);
    }
  } catch (const CLI::ParseError&) {
    // a usage error: zerolab prints it and exits 2
  } catch (const zl::Error& error) {
    expect_one_line(error);  // a flag's own check, e.g. --stage 4
  }
  return 0;
}
