// reshard.hpp — loading a checkpoint's shards into any world size. Every unit's real elements sit
// at the same offsets whatever the world (padding only at the end), so element j of a unit lives
// in old rank j / S_old at j % S_old; a new shard is the old shards' elements of its range, with
// zeros where the range passes numel. The piece math is pure; the reader reads one shard at a time.
#pragma once

#include <cstdint>
#include <vector>

#include "ckpt/checkpoint.hpp"
#include "ckpt/manifest.hpp"
#include "ckpt/safetensors.hpp"
#include "engines/engine.hpp"
#include "engines/partition.hpp"

namespace zl {

/// A run of elements that one old shard contributes to a range of a unit.
struct ShardPiece {
  int rank = 0;                         ///< the old rank whose shard holds them
  std::int64_t shard_offset_elems = 0;  ///< where they start in that shard
  std::int64_t out_offset_elems = 0;    ///< where they start in the range
  std::int64_t elems = 0;               ///< length of the run, at least 1

  /// All four fields equal.
  bool operator==(const ShardPiece&) const = default;
};

/// The pieces of elements [range.begin, range.end) of `unit` (laid out for `world`), in order.
/// Only real elements (below unit.numel) are listed; the rest of the range is padding, zero.
std::vector<ShardPiece> pieces_of(const UnitLayout& unit, int world, ShardRange range);

/// Throws zl::Error naming the manifest and the first difference unless `layout` is the model the
/// checkpoint was saved from: the same units, in order, with the same parameter names and shapes
/// (of kind ErrorKind::Usage: the model asked for is another, the checkpoint is sound).
void check_same_model(const Manifest& manifest, const std::vector<UnitLayout>& layout);

/// A checkpoint's rank files opened for reading one unit at a time (headers read once).
class ShardReader {
 public:
  /// Reads the header of every rank file `manifest` lists (from manifest.step_dir); `manifest`
  /// must outlive the reader.
  explicit ShardReader(const Manifest& manifest);
  /// Elements [range.begin, range.end) of unit `unit`'s flat `tensor` buffer as the old shards
  /// concatenated hold it, zeros past numel. Reads only the old shards the range touches, one at
  /// a time; throws zl::Error naming the file if one is not fp32 [shard_elems].
  std::vector<float> read_range(std::size_t unit, ShardTensor tensor, ShardRange range) const;

 private:
  const Manifest& manifest_;
  std::vector<SafetensorsIndex> files_;
};

/// Rank `new_rank`'s shards under `new_layout` (the model laid out for `new_world`), from the
/// checkpoint `manifest` describes, whatever world wrote it. Checks the model matches first. Reads
/// one unit at a time; safe to call from every rank's thread at once.
ShardState load_rank_shards(const Manifest& manifest, const std::vector<UnitLayout>& new_layout,
                            int new_rank, int new_world);

}  // namespace zl
