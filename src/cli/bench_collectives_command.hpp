// bench_collectives_command.hpp — `zerolab bench collectives`: the simulator's collectives per
// op, world and size (algbw, busbw, the shared-memory ideal and busbw's share of it, as
// src/bench/collectives_bench.hpp defines them), and each op's 4 KiB latency per world.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>

namespace zl {

/// Adds `collectives` under the `bench` subcommand; `run` is set to the function that sweeps
/// and prints a table, or one JSON object with --json. Bad flags throw during parsing.
CLI::App* add_bench_collectives(CLI::App& bench, std::function<int()>& run);

}  // namespace zl
