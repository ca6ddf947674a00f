// bench_command.hpp — `zerolab bench adam|collectives|step|nvme [--json]`: the speed measurements
// of docs/performance.md. `adam` times the fused AdamW kernel against the same run's STREAM triad
// and, when Python can import torch, torch.optim.AdamW with the same threads; `collectives` sweeps
// the simulator's collectives (algbw and busbw as nccl-tests defines them) against memcpy;
// `step` trains the same config at every ZeRO stage and reports each stage's overhead over DDP;
// `nvme` measures a folder's disk for ZeRO-Infinity's swap files.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace zl {

/// Adds the `bench` subcommand (with `adam`, `collectives`, `step` and `nvme` under it) to `app`;
/// `run` is set to the function that measures and prints. Bad flags throw during parsing.
CLI::App* add_bench_command(CLI::App& app, std::function<int()>& run);

/// Adds `step` under `bench` (bench_step_command.cpp); `run` is set as add_bench_command says.
CLI::App* add_bench_step(CLI::App& bench, std::function<int()>& run);

/// Adds `nvme` under `bench` (bench_nvme_command.cpp); `run` is set as add_bench_command says.
CLI::App* add_bench_nvme(CLI::App& bench, std::function<int()>& run);

/// "4096", "4K", "64M", "1G" (also "KiB", "MiB", "GiB"; binary multiples) in bytes; throws
/// zl::Error naming `flag` for anything else or zero.
std::size_t parse_size_bytes(const std::string& text, const std::string& flag);

/// "2..8" (every world from 2 to 8), "2,4,8" or "4"; throws zl::Error naming `flag` for anything
/// else, an empty range or a world below 1.
std::vector<int> parse_worlds(const std::string& text, const std::string& flag);

}  // namespace zl
