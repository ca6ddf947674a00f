// checkpoint.hpp — sharded checkpoints on disk, laid out like DeepSpeed's global_stepN + latest:
//   DIR/step-<8 digits>/rank-<r>.safetensors   one per rank: {unit}.params, {unit}.exp_avg,
//                                              {unit}.exp_avg_sq, fp32 [shard_elems] each
//   DIR/step-<8 digits>/manifest.json          the run and its id, the model, the partition, each
//                                              file's size and sha256, its own sha256
//                                              (ckpt/manifest.hpp)
//   DIR/latest                                 the name of the newest complete step directory
// Each rank writes its file, then one process commits: manifest.json, then latest, each atomic.
// A save that dies before the commit leaves the previous latest and its step directory as they
// were.
// One run owns a folder at a time (ckpt/checkpoint_folder.hpp).
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ckpt/manifest.hpp"
#include "engines/engine.hpp"
#include "engines/partition.hpp"

namespace zl {

/// The per-unit tensors a rank file holds.
enum class ShardTensor { Params, ExpAvg, ExpAvgSq };

/// Every ShardTensor, in the order a rank file stores them for each unit.
inline constexpr std::array<ShardTensor, 3> kShardTensors = {
    ShardTensor::Params, ShardTensor::ExpAvg, ShardTensor::ExpAvgSq};

/// "params", "exp_avg" or "exp_avg_sq".
std::string_view shard_tensor_suffix(ShardTensor tensor);

/// The tensor's name in a rank file: "<unit>.<suffix>", e.g. "layers.0.exp_avg".
std::string shard_tensor_name(std::string_view unit, ShardTensor tensor);

/// The member of `state` that holds `tensor` (one vector per unit).
std::vector<std::vector<float>>& shard_member(ShardState& state, ShardTensor tensor);
const std::vector<std::vector<float>>& shard_member(const ShardState& state, ShardTensor tensor);

/// DIR/step-<step as 8 digits>, e.g. DIR/step-00000100.
std::filesystem::path step_dir(const std::filesystem::path& dir, std::int64_t step);

/// Writes rank `rank`'s shards to `step_directory`/rank-<rank>.safetensors (creating the
/// directory), streaming and hashing as it goes, and returns the entry for the manifest. `layout`
/// is the partition the shards follow; `state` must hold shard_elems floats per unit in each
/// member. `run_id` (the run's new_run_id()) goes into the file's `__metadata__` as "run_id", for
/// read_manifest to match with the manifest's. Throws zl::Error if the step is already committed
/// there (checkpoints are never rewritten).
FileEntry write_rank_file(const std::filesystem::path& step_directory, int rank,
                          const std::vector<UnitLayout>& layout, const ShardState& state,
                          std::string_view run_id);

/// Commits step manifest.step in `dir`: checks the manifest, and that each of `files` is on disk
/// with its recorded size, then writes step-<N>/manifest.json (listing `files`) and then
/// `dir`/latest, both atomically. `files` are the entries write_rank_file returned, rank 0 first.
void commit_checkpoint(const std::filesystem::path& dir, const Manifest& manifest,
                       std::span<const FileEntry> files);

/// Reads the checkpoint at `path`: a checkpoint directory (follows `latest`) or one step directory.
/// Verifies the manifest's own checksum, and every rank file's existence, size, run id (the
/// manifest's), sha256, and that it holds each unit's tensors as fp32 [shard_elems]. Every problem
/// is a one-line zl::Error naming the file and what is wrong.
Manifest read_manifest(const std::filesystem::path& path);

/// The step directory `path` stands for: the one `latest` names in a checkpoint directory, or
/// `path` itself if it holds a manifest.json. Throws zl::Error if neither leads to a manifest.
std::filesystem::path resolve_step_dir(const std::filesystem::path& path);

}  // namespace zl
