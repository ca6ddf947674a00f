// output_paths.hpp — every path `zerolab train` writes, checked before anything runs: no output
// in or on a checkpoint folder, no two outputs on one file, none on a device, fifo or directory.
#pragma once

#include <vector>

#include "cli/train_command.hpp"

namespace zl {

/// The files the command writes after the run, each with its flag: --metrics, --summary,
/// --save-init, --save-final, --save-data and --trace, those given, in that order.
std::vector<OutputFile> output_files(const TrainOutputs& outputs);

/// Checks every path the train command writes, touching nothing on disk: --checkpoint-dir is a
/// directory or can be created as one; no output file is, or lies inside, the folder --resume
/// reads or --checkpoint-dir writes, or a folder holding committed checkpoint steps or a step's
/// manifest.json; each output can be written (check_writable: its directory exists and is
/// writable, and it is new or a regular file); and no two outputs are one file, by path once
/// links, `.` and `..` are resolved, or by inode (a hard link). Throws zl::Error in one line
/// naming the flags and paths and what to do.
void check_output_paths(const TrainOutputs& outputs, const CheckpointPlan& checkpoints);

}  // namespace zl
