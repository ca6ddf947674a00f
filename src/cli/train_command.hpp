// train_command.hpp — `zerolab train`: flags (train_flags.cpp), a DeepSpeed JSON config
// (ds_config.hpp), progress lines, the summary and output files (train_command.cpp).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cli/ds_config.hpp"
#include "run/train.hpp"

namespace zl {

/// Flags of `zerolab train` beyond the TrainConfig.
struct TrainOutputs {
  std::filesystem::path metrics;     ///< JSON lines, one per step
  std::filesystem::path summary;     ///< JSON: both ledgers of every rank
  std::filesystem::path save_init;   ///< fp32 safetensors of the initial parameters
  std::filesystem::path save_final;  ///< fp32 safetensors of the final parameters
  std::filesystem::path save_data;   ///< safetensors x and y of every sample used
  bool quiet = false;                ///< no per-step progress lines
  std::int64_t steps_per_print = 1;  ///< a progress line every K steps, and after the last
  std::filesystem::path trace;       ///< Chrome trace of the simulated timeline (sim/trace.hpp)
  int what_if_world = 0;             ///< predict the run on this many ranks (0: no prediction)
};

/// GPT sizes given by flags (--n-layer, ...), applied over the preset; empty when not given.
struct GptOverrides {
  std::optional<int> n_layer;              ///< --n-layer: transformer blocks
  std::optional<int> n_head;               ///< --n-head: attention heads per block
  std::optional<std::int64_t> n_embd;      ///< --n-embd: channels C
  std::optional<std::int64_t> block_size;  ///< --block-size: tokens per sequence T
  std::optional<std::int64_t> vocab;       ///< --vocab: vocabulary size V
};

/// A parsed `zerolab train` command line.
struct TrainArgs {
  TrainConfig config;                     ///< the run itself (what decides the bits)
  TrainOutputs outputs;                   ///< files to write and what to print
  CheckpointPlan checkpoints;             ///< --checkpoint-dir, --checkpoint-every, --resume
  std::optional<std::string> gpt_preset;  ///< --preset; "tiny" when --model gpt names none
  GptOverrides gpt_sizes;                 ///< --n-layer, --n-head, --n-embd, --block-size, --vocab
  std::optional<DsConfig> ds_config;      ///< --config, as read from the file
  std::vector<std::string> config_warnings;  ///< --config's unknown keys, one line each
  bool steps_given = false;  ///< --steps was on the line (else --model gpt trains longer)
  bool lr_given = false;     ///< --lr was on the line (else --model gpt uses a larger one)
  bool world_given = false;  ///< --world was on the line (else --backend mpi takes mpirun's -np)
  /// --gpus-per-node was on the line (else mpi and nccl take the launcher's ranks a node)
  bool gpus_per_node_given = false;
  bool mpi_reduce_given = false;    ///< --mpi-reduce was on the line (it needs --backend mpi)
  bool accelerator_given = false;   ///< --accelerator was on the line (else nccl implies cuda)
  bool offload_param_flag = false;  ///< --offload-param was on the line (it needs --stage 3)
  /// --shard-group node: ZeRO-3 shards inside each node (features.shard_group_ranks is set to the
  /// node's ranks once the world and the nodes are known, in launch_config)
  bool shard_group_node = false;
  /// The settings a checkpoint remembers that the flags or --config set (ResumeSetting bits):
  /// --resume takes the others from the checkpoint.
  std::uint32_t settings_given = 0;
  /// --strict: --config's keys that zerolab does not implement and unknown keys are errors.
  bool strict = false;
};

/// Adds the flags of `zerolab train` to `cmd`; parsing writes them into `args`, which must outlive
/// `cmd`. --config's file is applied first, whatever its place on the line, so every other flag
/// overrides it. A flag's own check (--stage 4, --grad-accum 0, a bad --inject-fault, an
/// unreadable or invalid --config) throws zl::Error during parsing.
void add_train_flags(CLI::App& cmd, TrainArgs& args);

/// Completes parsed flags with what needs all of them: the GPT preset (--model gpt) with the size
/// flags over it, the GPT's defaults of 100 steps at lr 3e-3 where neither a flag nor --config
/// sets them (the MLP's 10 steps at 1e-3 barely move a GPT), and --config's train_batch_size rule.
/// Throws zl::Error for GPT flags without --model gpt, an unknown preset, or a train_batch_size
/// that is not micro * accum * world.
void finish_train_args(TrainArgs& args);

/// Adds the `train` subcommand to `app`; `run` is set to the function that executes it.
CLI::App* add_train_command(CLI::App& app, std::function<int()>& run);

/// Parses the arguments after `zerolab train` and finishes them (finish_train_args) without running
/// anything (the fuzzer's entry and the tests'). Throws CLI::ParseError (CLI::CallForHelp for
/// --help) or zl::Error, as `zerolab train` reports them; validate(config) is left to the caller,
/// as run_train() does it.
TrainArgs parse_train_args(const std::vector<std::string>& args);

/// The config a parsed command runs: with --backend mpi, the world is the number of processes
/// mpirun started (initialising MPI) unless --world gave one, which train() then checks against
/// it. Throws zl::Error if zerolab was built without MPI.
TrainConfig launch_config(const TrainArgs& args);

/// Runs a parsed train command whose output paths passed check_output_paths (cli/output_paths.hpp):
/// checks the settings, warns of what --init's Hugging Face folder sets that the run ignores (its
/// dropout), trains, prints, writes files. Returns the exit code. On the mpi backend only rank 0's
/// process prints the run and writes; the others return 0.
int run_train(const TrainConfig& config, const TrainOutputs& outputs,
              const CheckpointPlan& checkpoints = {});

}  // namespace zl
