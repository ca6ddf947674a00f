// train_flag_groups.hpp — the groups of `zerolab train` flags that live in files of their own,
// for train_flags.cpp, which adds every group to the command (`zerolab bench step` adds the GPT
// sizes and --threads too).
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>

#include "cli/ds_config.hpp"
#include "cli/train_command.hpp"

namespace zl {

/// --n-layer, --n-head, --n-embd, --block-size and --vocab into `sizes` (shared_flags.cpp): each
/// must be >= 1, a one-line error naming the flag otherwise.
void add_gpt_size_flags(CLI::App& cmd, GptOverrides& sizes);

/// The sizes given over `gpt` (a preset's), then validate(gpt).
void apply_gpt_sizes(const GptOverrides& sizes, GptConfig& gpt);

/// `--threads N` into `threads` (shared_flags.cpp): CPU threads per rank for the kernels, 1 to
/// 1024; anything else is a one-line error naming the flag.
void add_threads_flag(CLI::App& cmd, int& threads);

/// `--accelerator cpu|cuda|cpu-detached` into `accelerator` (shared_flags.cpp), setting `*given`
/// (when not null) once the flag appears. Returns the option, for its default's text.
CLI::Option* add_accelerator_flag(CLI::App& cmd, Accelerator& accelerator, bool* given = nullptr);

/// ZL_THREADS as a thread count (1 to 1024), 0 when it is not set; throws zl::Error naming it for
/// anything else. What --threads defaults to.
int threads_from_env();

/// AdamW's flags, the learning-rate schedule's and --seed: the settings a checkpoint remembers.
/// Each one given is marked in args.settings_given, so --resume takes only the others from the
/// checkpoint.
void add_optimizer_flags(CLI::App& cmd, TrainArgs& args);

/// --aio-block-size, --aio-queue-depth, --aio-thread-count, --aio-backend, --pipeline-read,
/// --pipeline-write and --swap-buffer-count into `features` (swap_flags.cpp).
void add_swap_flags(CLI::App& cmd, TrainingFeatures& features);

/// The settings a --config file sets, as ResumeSetting bits.
std::uint32_t settings_of(const DsConfig& ds);

}  // namespace zl
