// train_flag_groups.hpp — the groups of `zerolab train` flags that live in files of their own,
// for train_flags.cpp, which adds every group to the command.
#pragma once

#include <CLI/CLI.hpp>

#include <cstdint>

#include "cli/ds_config.hpp"
#include "cli/train_command.hpp"

namespace zl {

/// AdamW's flags, the learning-rate schedule's and --seed: the settings a checkpoint remembers.
/// Each one given is marked in args.settings_given, so --resume takes only the others from the
/// checkpoint.
void add_optimizer_flags(CLI::App& cmd, TrainArgs& args);

/// The settings a --config file sets, as ResumeSetting bits.
std::uint32_t settings_of(const DsConfig& ds);

}  // namespace zl
