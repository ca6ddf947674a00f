// manifest.hpp — what a checkpoint says about itself (DIR/step-<N>/manifest.json): the run that
// wrote it, the model, the partition its shards follow, and the size and SHA-256 of every file.
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

/// The manifest format this zerolab writes and reads.
inline constexpr int kCheckpointFormatVersion = 1;

/// The most elements a manifest may give one unit: far beyond any model, and far enough from
/// int64 overflow that offsets and padding can be summed without checks.
inline constexpr std::int64_t kMaxUnitElems = std::int64_t{1} << 60;

/// One file of a checkpoint as the manifest records it.
struct FileEntry {
  std::string name;  ///< relative to the step directory, e.g. "rank-0.safetensors"
  std::uint64_t size_bytes = 0;  ///< the file's exact size, checked before it is read
  std::string sha256;  ///< 64 lowercase hex digits

  /// Same name, size and digest.
  bool operator==(const FileEntry&) const = default;
};

/// The contents of manifest.json. The shards follow `units`, the partition for `world`.
struct Manifest {
  int format_version = kCheckpointFormatVersion;  ///< a reader refuses any other version
  std::int64_t step = 0;  ///< completed optimizer steps
  std::int64_t adam_updates = 0;  ///< AdamW updates applied (fewer than step if steps were skipped)
  int stage = 0;          ///< ZeRO stage that wrote it (0 is DDP); any stage and world can load it
  int world = 1;          ///< ranks that wrote it, one file each
  std::string model_kind = "mlp";  ///< "mlp" or "gpt"
  MlpConfig mlp;                   ///< the shape when model_kind is "mlp"
  GptConfig gpt;                   ///< the shape when model_kind is "gpt"
  std::uint64_t seed = 0;  ///< parameter init and data
  std::int64_t micro_batch = 1;       ///< samples per rank per micro-step
  std::int64_t grad_accum_steps = 1;  ///< micro-batches per optimizer step
  AdamWConfig adamw;                  ///< the optimizer settings the state was built with
  LrSchedule lr_schedule{};  ///< the schedule the updates followed (key "lr_schedule")
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

/// The first inconsistency in `manifest`, or nothing: an unknown version or model kind, a size out
/// of range, a unit not laid out as layout_units() lays it out for `world` (params back to back),
/// or files other than rank-0 ... rank-<world-1> with 64-digit lowercase sha256s.
std::optional<std::string> manifest_problem(const Manifest& manifest);

/// The manifest as JSON text (2-space indented), with "data.next_sample" filled in.
std::string manifest_json(const Manifest& manifest);

/// Parses and checks manifest text; every problem (bad JSON, a missing key, a wrong type, an
/// inconsistent layout) is a one-line zl::Error naming `shown` and the key.
Manifest parse_manifest(std::string_view text, std::string_view shown);

}  // namespace zl
