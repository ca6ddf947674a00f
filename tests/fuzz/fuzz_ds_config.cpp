// fuzz_ds_config.cpp — libFuzzer target for the DeepSpeed JSON reader of `zerolab train --config`:
// the input is the file's text, parsed, applied to a default TrainConfig and checked against the
// train_batch_size rule. Any text must end in a config or in a zl::Error of one line per problem,
// each naming the file, and every warning and "auto" note must be one line; never a crash,
// undefined behaviour or another exception.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "cli/ds_config.hpp"
#include "core/error.hpp"

namespace {

void expect_one_line(std::string_view text) {
  if (text.find('\n') != std::string_view::npos) std::abort();
}

// Each line of a config's error is one problem, naming the file.
void expect_lines_naming_the_file(std::string_view text) {
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('\n', start), text.size());
    if (!text.substr(start, end - start).starts_with("fuzz.json: ")) std::abort();
    start = end + 1;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> warnings;
  try {
    const zl::DsConfig ds = zl::parse_ds_config(text, "fuzz.json", warnings);
    zl::TrainConfig config;
    std::int64_t steps_per_print = 1;
    zl::apply_ds_config(ds, config, steps_per_print);
    zl::check_train_batch_size(ds, config);
    for (const std::string& line : zl::auto_resolutions(ds, config, steps_per_print)) {
      expect_one_line(line);
    }
  } catch (const zl::Error& error) {
    expect_lines_naming_the_file(error.what());
  }
  for (const std::string& warning : warnings) expect_one_line(warning);
  return 0;
}
