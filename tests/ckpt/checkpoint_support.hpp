// checkpoint_support.hpp — helpers for checkpoint tests: MLP layouts without training, shard states
// filled with deterministic values (every element, unit and tensor its own value; padding zero),
// saving them as a committed checkpoint, and assembling shards back into the full unpadded state.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "ckpt/manifest.hpp"
#include "ckpt/reshard.hpp"
#include "engines/engine.hpp"
#include "engines/partition.hpp"
#include "model/mlp.hpp"
#include "ops/cpu/cpu_device.hpp"

namespace zl::test {

/// The MLP's units laid out for `world`.
inline std::vector<UnitLayout> mlp_layout(const MlpConfig& config, int world) {
  CpuDevice device;
  return layout_units(Mlp(device, config).units(), world);
}

/// The value element `element` of unit `unit`'s `tensor` holds in every test state: a splitmix64
/// hash mapped to [-1, 1), so that a moved, dropped or swapped element shows; shifted to [0, 2)
/// for exp_avg_sq, which a checkpoint never holds negative.
inline float fill_value(std::size_t unit, ShardTensor tensor, std::int64_t element) {
  std::uint64_t x = (unit * 3 + static_cast<std::uint64_t>(tensor)) * 0x9e3779b97f4a7c15ULL +
                    static_cast<std::uint64_t>(element);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  x ^= x >> 31;
  const float value = static_cast<float>(x >> 40) * 0x1p-23f - 1.0f;
  return tensor == ShardTensor::ExpAvgSq ? value + 1.0f : value;
}

/// Rank `rank`'s shards under `layout` (laid out for `world`) of the fill_value state.
inline ShardState filled_shards(const std::vector<UnitLayout>& layout, int rank, int world) {
  ShardState state;
  for (std::size_t u = 0; u < layout.size(); ++u) {
    const ShardRange range = shard_of(layout[u], rank, world);
    for (const ShardTensor tensor : kShardTensors) {
      std::vector<float> shard(static_cast<std::size_t>(range.size()), 0.0f);
      for (std::int64_t e = range.begin; e < std::min(range.end, layout[u].numel); ++e) {
        shard[static_cast<std::size_t>(e - range.begin)] = fill_value(u, tensor, e);
      }
      shard_member(state, tensor).push_back(std::move(shard));
    }
  }
  return state;
}

/// The full unpadded fill_value state: per tensor, one vector of numel values per unit.
using FullState = std::vector<std::vector<std::vector<float>>>;  // [tensor][unit][element]

inline FullState filled_full_state(const std::vector<UnitLayout>& layout) {
  FullState full(kShardTensors.size());
  for (const ShardTensor tensor : kShardTensors) {
    for (std::size_t u = 0; u < layout.size(); ++u) {
      std::vector<float> values(static_cast<std::size_t>(layout[u].numel));
      for (std::int64_t e = 0; e < layout[u].numel; ++e) {
        values[static_cast<std::size_t>(e)] = fill_value(u, tensor, e);
      }
      full[static_cast<std::size_t>(tensor)].push_back(std::move(values));
    }
  }
  return full;
}

/// The full unpadded state from every rank's shards; fails the test if any padding is not zero.
inline FullState assemble(const std::vector<ShardState>& shards,
                          const std::vector<UnitLayout>& layout) {
  FullState full(kShardTensors.size());
  for (const ShardTensor tensor : kShardTensors) {
    for (std::size_t u = 0; u < layout.size(); ++u) {
      std::vector<float> padded;
      for (const auto& state : shards) {
        const auto& shard = shard_member(state, tensor).at(u);
        EXPECT_EQ(static_cast<std::int64_t>(shard.size()), layout[u].shard_elems);
        padded.insert(padded.end(), shard.begin(), shard.end());
      }
      for (std::size_t e = static_cast<std::size_t>(layout[u].numel); e < padded.size(); ++e) {
        EXPECT_EQ(std::bit_cast<std::uint32_t>(padded[e]), 0u)
            << "padding element " << e << " of unit " << layout[u].name << " is " << padded[e];
      }
      padded.resize(static_cast<std::size_t>(layout[u].numel));
      full[static_cast<std::size_t>(tensor)].push_back(std::move(padded));
    }
  }
  return full;
}

/// The bit patterns of `values`, so that == is bitwise.
inline std::vector<std::uint32_t> bits(const std::vector<float>& values) {
  std::vector<std::uint32_t> patterns(values.size());
  for (std::size_t i = 0; i < values.size(); ++i)
    patterns[i] = std::bit_cast<std::uint32_t>(values[i]);
  return patterns;
}

/// Expects `actual` to equal `expected` bit for bit, naming the first differing element.
inline void expect_bitwise_equal(const FullState& actual, const FullState& expected) {
  ASSERT_EQ(actual.size(), expected.size());
  for (std::size_t t = 0; t < expected.size(); ++t) {
    ASSERT_EQ(actual[t].size(), expected[t].size());
    for (std::size_t u = 0; u < expected[t].size(); ++u) {
      ASSERT_EQ(actual[t][u].size(), expected[t][u].size()) << "tensor " << t << " unit " << u;
      if (bits(actual[t][u]) == bits(expected[t][u])) continue;
      for (std::size_t e = 0; e < expected[t][u].size(); ++e) {
        ASSERT_EQ(std::bit_cast<std::uint32_t>(actual[t][u][e]),
                  std::bit_cast<std::uint32_t>(expected[t][u][e]))
            << "tensor " << t << " unit " << u << " element " << e << ": " << actual[t][u][e]
            << " vs " << expected[t][u][e];
      }
    }
  }
}

/// The run id of the test checkpoints.
inline constexpr std::string_view kTestRunId = "0123456789abcdef0123456789abcdef";

/// A manifest for the MLP `config` saved by `world` ranks at step `step` (no files yet), by run
/// kTestRunId.
inline Manifest test_manifest(const MlpConfig& config, int world, std::int64_t step) {
  Manifest manifest;
  manifest.run_id = kTestRunId;
  manifest.step = step;
  manifest.stage = 2;
  manifest.world = world;
  manifest.mlp = config;
  manifest.seed = 7;
  manifest.micro_batch = 4;
  manifest.adamw = {3e-3, 0.9, 0.95, 1e-8, 0.1};
  manifest.units = mlp_layout(config, world);
  return manifest;
}

/// Writes every rank's file of `shards_of(rank)` and commits step `step` in `dir`; returns the
/// manifest as read back.
inline Manifest save_checkpoint(const std::filesystem::path& dir, const MlpConfig& config,
                                int world, std::int64_t step,
                                const std::function<ShardState(int rank)>& shards_of) {
  const Manifest manifest = test_manifest(config, world, step);
  std::vector<FileEntry> files;
  for (int rank = 0; rank < world; ++rank) {
    files.push_back(write_rank_file(step_dir(dir, step), rank, manifest.units, shards_of(rank),
                                    manifest.run_id));
  }
  commit_checkpoint(dir, manifest, files);
  return read_manifest(dir);
}

/// save_checkpoint of the fill_value state.
inline Manifest save_filled(const std::filesystem::path& dir, const MlpConfig& config, int world,
                            std::int64_t step) {
  const auto layout = mlp_layout(config, world);
  return save_checkpoint(dir, config, world, step,
                         [&](int rank) { return filled_shards(layout, rank, world); });
}

/// Every rank's shards under `config` laid out for `world`, loaded from `manifest`.
inline std::vector<ShardState> load_all(const Manifest& manifest, const MlpConfig& config,
                                        int world) {
  const auto layout = mlp_layout(config, world);
  std::vector<ShardState> shards;
  for (int rank = 0; rank < world; ++rank) {
    shards.push_back(load_rank_shards(manifest, layout, rank, world));
  }
  return shards;
}

}  // namespace zl::test
