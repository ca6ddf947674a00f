// shared_flags.cpp — the flags `zerolab train` and `zerolab bench step` share: the GPT sizes over
// a preset, and --threads with ZL_THREADS, how many CPU threads each rank's kernels run on (the
// count never changes a result, docs/exactness.md, only the time a step takes).
#include <charconv>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "cli/train_flag_groups.hpp"
#include "core/error.hpp"
#include "model/gpt_config.hpp"

namespace zl {

namespace {

constexpr int kMaxThreads = 1024;

int parse_thread_count(std::string_view text, std::string_view name) {
  int threads = 0;
  const char* last = text.data() + text.size();
  const auto [end, error] = std::from_chars(text.data(), last, threads);
  ZL_CHECK(error == std::errc() && end == last && threads >= 1 && threads <= kMaxThreads,
           "{} '{}' is invalid: give a thread count from 1 to {}", name, text, kMaxThreads);
  return threads;
}

// A GPT size flag: recorded, applied over the preset by apply_gpt_sizes.
template <class T>
void add_gpt_size(CLI::App& cmd, const std::string& name, std::optional<T>& target,
                  const std::string& help) {
  cmd.add_option_function<T>(
      name,
      [&target, name](const T& value) {
        ZL_CHECK(value >= 1, "{} {} is invalid: use 1 or more", name, value);
        target = value;
      },
      help + " (overrides the preset's)");
}

}  // namespace

void add_gpt_size_flags(CLI::App& cmd, GptOverrides& sizes) {
  add_gpt_size(cmd, "--n-layer", sizes.n_layer, "GPT blocks");
  add_gpt_size(cmd, "--n-head", sizes.n_head, "GPT attention heads");
  add_gpt_size(cmd, "--n-embd", sizes.n_embd, "GPT channels (a multiple of --n-head)");
  add_gpt_size(cmd, "--block-size", sizes.block_size, "GPT context length in tokens");
  add_gpt_size(cmd, "--vocab", sizes.vocab, "GPT vocabulary size in tokens");
}

void apply_gpt_sizes(const GptOverrides& sizes, GptConfig& gpt) {
  if (sizes.n_layer) gpt.n_layer = *sizes.n_layer;
  if (sizes.n_head) gpt.n_head = *sizes.n_head;
  if (sizes.n_embd) gpt.n_embd = *sizes.n_embd;
  if (sizes.block_size) gpt.block_size = *sizes.block_size;
  if (sizes.vocab) gpt.vocab = *sizes.vocab;
  validate(gpt);
}

void add_threads_flag(CLI::App& cmd, int& threads) {
  cmd.add_option_function<std::string>(
         "--threads",
         [&threads](const std::string& text) { threads = parse_thread_count(text, "--threads"); },
         "CPU threads per rank for the kernels (default: ZL_THREADS, else the cores divided "
         "among the ranks); never changes the results")
      ->type_name("N");
}

CLI::Option* add_accelerator_flag(CLI::App& cmd, Accelerator& accelerator, bool* given) {
  static const std::map<std::string, Accelerator> kNames = {
      {"cpu", Accelerator::Cpu},
      {"cuda", Accelerator::Cuda},
      {"cpu-detached", Accelerator::CpuDetached}};
  return cmd
      .add_option_function<std::string>(
          "--accelerator",
          [&accelerator, given](const std::string& name) {
            accelerator = kNames.at(name);
            if (given != nullptr) *given = true;
          },
          "Where ranks compute: cpu | cuda (GPU memory and kernels; the sim's ranks share GPU 0, "
          "nccl's use GPU LOCAL_RANK) | cpu-detached (the CPU kernels on memory the host may not "
          "touch: checks that a run never reads device memory on the host)")
      ->transform(CLI::IsMember({"cpu", "cuda", "cpu-detached"}, CLI::ignore_case));
}

int threads_from_env() {
  const char* value = std::getenv("ZL_THREADS");
  return value == nullptr ? 0 : parse_thread_count(value, "ZL_THREADS");
}

}  // namespace zl
