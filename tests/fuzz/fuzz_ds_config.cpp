// fuzz_ds_config.cpp — libFuzzer target for the DeepSpeed JSON reader of `zerolab train --config`:
// the input is the file's text, parsed, applied to a default TrainConfig and checked against the
// train_batch_size rule. Any text must end in a config or in a one-line zl::Error, and every
// warning must be one line; never a crash, undefined behaviour or another exception.
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
  } catch (const zl::Error& error) {
    expect_one_line(error.what());
  }
  for (const std::string& warning : warnings) expect_one_line(warning);
  return 0;
}
