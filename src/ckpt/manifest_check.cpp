// manifest_check.cpp — what makes a manifest consistent: a known version and model, a run id (from
// version 2), sizes in range, units laid out exactly as layout_units() lays them out for the
// world, one named file per rank.
#include <fmt/format.h>

#include <algorithm>
#include <optional>
#include <set>

#include "ckpt/manifest.hpp"

namespace zl {

namespace {

// The first way `units` differ from what layout_units() gives for their parameters and `world`.
std::optional<std::string> units_problem(const std::vector<UnitLayout>& units, int world) {
  if (units.empty()) return "it lists no units";
  std::set<std::string_view> names;
  for (const auto& unit : units) {
    if (!names.insert(unit.name).second) return fmt::format("unit {:?} appears twice", unit.name);
    if (unit.params.empty()) return fmt::format("unit {:?} has no parameters", unit.name);
    std::int64_t offset = 0;
    for (const auto& param : unit.params) {
      if (param.offset_elems != offset) {
        return fmt::format("parameter {:?} starts at element {}, not {} where the one before ends",
                           param.name, param.offset_elems, offset);
      }
      if (param.numel < 1 || param.numel != numel(param.shape)) {
        return fmt::format("parameter {:?} has numel {} for shape {}", param.name, param.numel,
                           shape_string(param.shape));
      }
      if (param.pad_rows != 0 && (param.pad_rows < 0 || param.shape.empty() ||
                                  param.pad_rows >= param.shape.front())) {
        return fmt::format("parameter {:?} has {} padded rows for shape {}", param.name,
                           param.pad_rows, shape_string(param.shape));
      }
      offset += param.numel;
      if (offset > kMaxUnitElems) {
        return fmt::format("unit {:?} holds more elements than any model", unit.name);
      }
    }
    if (unit.numel != offset) {
      return fmt::format("unit {:?} has numel {} but its parameters hold {} elements", unit.name,
                         unit.numel, offset);
    }
    if (unit.padded_elems != padded_elems(unit.numel, world) ||
        unit.shard_elems * world != unit.padded_elems) {
      return fmt::format(
          "unit {:?} has padded_elems {} and shard_elems {}, but world {} pads {} elements to {}",
          unit.name, unit.padded_elems, unit.shard_elems, world, unit.numel,
          padded_elems(unit.numel, world));
    }
  }
  return std::nullopt;
}

bool is_lower_hex(const std::string& text, std::size_t digits) {
  return text.size() == digits && std::ranges::all_of(text, [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

bool is_sha256_hex(const std::string& text) {
  return is_lower_hex(text, 64);
}

bool is_run_id(const std::string& text) {
  return is_lower_hex(text, kRunIdChars);
}

}  // namespace

std::int64_t next_sample(const Manifest& manifest) {
  return manifest.step * manifest.grad_accum_steps * manifest.world * manifest.micro_batch;
}

std::string model_summary(const Manifest& manifest) {
  if (manifest.model_kind == "gpt") {
    const GptConfig& gpt = manifest.gpt;
    return fmt::format("gpt: n_layer {}, n_head {}, n_embd {}, block_size {}, vocab {}",
                       gpt.n_layer, gpt.n_head, gpt.n_embd, gpt.block_size, gpt.vocab);
  }
  const MlpConfig& mlp = manifest.mlp;
  return fmt::format("{}: layers {}, width {}, in {}, classes {}", manifest.model_kind, mlp.layers,
                     mlp.width, mlp.in, mlp.classes);
}

std::string rank_file_name(int rank) {
  return fmt::format("rank-{}.safetensors", rank);
}

std::optional<std::string> manifest_problem(const Manifest& manifest) {
  if (manifest.format_version < kOldestCheckpointFormatVersion ||
      manifest.format_version > kCheckpointFormatVersion) {
    return fmt::format("format_version {} is not one this zerolab reads ({} to {})",
                       manifest.format_version, kOldestCheckpointFormatVersion,
                       kCheckpointFormatVersion);
  }
  if (manifest.format_version >= 2 ? !is_run_id(manifest.run_id) : !manifest.run_id.empty()) {
    return fmt::format("run_id {:?} is not {} lowercase hex digits", manifest.run_id,
                       manifest.format_version >= 2 ? kRunIdChars : 0);
  }
  if (manifest.model_kind != "mlp" && manifest.model_kind != "gpt") {
    return fmt::format("model kind {:?} is not one this zerolab reads (mlp, gpt)",
                       manifest.model_kind);
  }
  std::int64_t samples = 0;
  if (manifest.step < 0 || manifest.world < 1 || manifest.stage < 0 || manifest.stage > 3 ||
      manifest.micro_batch < 1 || manifest.grad_accum_steps < 1 ||
      __builtin_mul_overflow(manifest.step, manifest.world, &samples) ||
      __builtin_mul_overflow(samples, manifest.micro_batch, &samples) ||
      __builtin_mul_overflow(samples, manifest.grad_accum_steps, &samples)) {
    return fmt::format(
        "step {}, world {}, stage {}, micro_batch {} or gradient_accumulation_steps {} is out of "
        "range",
        manifest.step, manifest.world, manifest.stage, manifest.micro_batch,
        manifest.grad_accum_steps);
  }
  if (auto problem = units_problem(manifest.units, manifest.world)) return problem;
  if (manifest.files.size() != static_cast<std::size_t>(manifest.world)) {
    return fmt::format("it lists {} files for world {}", manifest.files.size(), manifest.world);
  }
  for (int rank = 0; rank < manifest.world; ++rank) {
    const FileEntry& file = manifest.files[static_cast<std::size_t>(rank)];
    if (file.name != rank_file_name(rank)) {
      return fmt::format("file {} is {:?}, not {:?}", rank, file.name, rank_file_name(rank));
    }
    if (!is_sha256_hex(file.sha256)) {
      return fmt::format("sha256 of {} is {:?}, not 64 lowercase hex digits", file.name,
                         file.sha256);
    }
  }
  return std::nullopt;
}

}  // namespace zl
