// manifest.hpp — what a checkpoint says about itself (DIR/step-<N>/manifest.json): the run that
// wrote it (its run id, which every shard's metadata repeats), the model, the partition its shards
// follow, the size and SHA-256 of every file, and the SHA-256 of the manifest's own content.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "engines/partition.hpp"
#include "model/gpt_config.hpp"
#include "model/mlp.hpp"
#include "optim/adamw.hpp"
#include "optim/loss_scaler.hpp"
#include "optim/lr_schedule.hpp"

namespace zl {

/// The manifest format this zerolab writes: version 2 adds the run id and the manifest's own
/// checksum ("manifest_sha256").
inline constexpr int kCheckpointFormatVersion = 2;

/// The oldest manifest format this zerolab still reads: version 1, written before run ids and the
/// manifest checksum, is read without them (its files are still checked against their sha256s).
inline constexpr int kOldestCheckpointFormatVersion = 1;

/// Characters of a run id: 32 lowercase hex digits (128 random bits).
inline constexpr std::size_t kRunIdChars = 32;

/// The most elements a manifest may give one unit: far beyond any model, and far enough from
/// int64 overflow that offsets and padding can be summed without checks.
inline constexpr std::int64_t kMaxUnitElems = std::int64_t{1} << 60;

/// One file of a checkpoint as the manifest records it.
struct FileEntry {
  std::string name;              ///< relative to the step directory, e.g. "rank-0.safetensors"
  std::uint64_t size_bytes = 0;  ///< the file's exact size, checked before it is read
  std::string sha256;            ///< 64 lowercase hex digits

  /// Same name, size and digest.
  bool operator==(const FileEntry&) const = default;
};

/// The contents of manifest.json. The shards follow `units`, the partition for `world`.
struct Manifest {
  /// kOldestCheckpointFormatVersion ... kCheckpointFormatVersion; a reader refuses any other.
  int format_version = kCheckpointFormatVersion;
  /// The run that wrote the step (new_run_id()), also in every rank file's `__metadata__` as
  /// "run_id"; empty only in a version 1 manifest.
  std::string run_id;
  std::int64_t step = 0;          ///< completed optimizer steps
  std::int64_t adam_updates = 0;  ///< AdamW updates applied (fewer than step if steps were skipped)
  int stage = 0;  ///< ZeRO stage that wrote it (0 is DDP); any stage and world can load it
  int world = 1;  ///< ranks that wrote it, one file each
  std::string model_kind = "mlp";     ///< "mlp" or "gpt"
  MlpConfig mlp;                      ///< the shape when model_kind is "mlp"
  GptConfig gpt;                      ///< the shape when model_kind is "gpt"
  std::uint64_t seed = 0;             ///< parameter init and data
  std::int64_t micro_batch = 1;       ///< samples per rank per micro-step
  std::int64_t grad_accum_steps = 1;  ///< micro-batches per optimizer step
  AdamWConfig adamw;                  ///< the optimizer settings the state was built with
  LrSchedule lr_schedule{};           ///< the schedule the updates followed (key "lr_schedule")
  /// fp16's dynamic loss scaler after `step` (key "loss_scaler", null when not fp16).
  std::optional<LossScalerState> loss_scaler{};
  std::vector<UnitLayout> units;  ///< laid out for `world`
  std::vector<FileEntry> files;   ///< rank-0.safetensors ... rank-<world-1>.safetensors
  /// Where the manifest was read from; not stored in the file.
  std::filesystem::path step_dir;
};

/// Data position: the global index of the next sample,
/// step * gradient_accumulation_steps * world * micro_batch (manifest key "data.next_sample").
std::int64_t next_sample(const Manifest& manifest);

/// The model in words for messages: "mlp: layers 3, width 13, in 6, classes 5" or
/// "gpt: n_layer 2, n_head 2, n_embd 32, block_size 16, vocab 64".
std::string model_summary(const Manifest& manifest);

/// The name of rank `rank`'s file: "rank-<rank>.safetensors".
std::string rank_file_name(int rank);

/// A fresh run id: kRunIdChars lowercase hex digits from std::random_device. Made once where a
/// run starts and handed to every rank.
std::string new_run_id();

/// The first inconsistency in `manifest`, or nothing: an unknown version or model kind, a run id
/// that is not kRunIdChars lowercase hex digits (or, in version 1, not empty), a size out
/// of range, a unit not laid out as layout_units() lays it out for `world` (params back to back),
/// or files other than rank-0 ... rank-<world-1> with 64-digit lowercase sha256s.
std::optional<std::string> manifest_problem(const Manifest& manifest);

/// The manifest as JSON text (2-space indented), with "data.next_sample" filled in and, last,
/// "manifest_sha256": the SHA-256 of the JSON of every other key, compact with sorted keys.
std::string manifest_json(const Manifest& manifest);

/// Parses and checks manifest text; every problem (bad JSON, a missing key, a wrong type, an
/// inconsistent layout, a manifest_sha256 its content does not hash to) is a one-line zl::Error
/// naming `shown` and the key.
Manifest parse_manifest(std::string_view text, std::string_view shown);

}  // namespace zl
