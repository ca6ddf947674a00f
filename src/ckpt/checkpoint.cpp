// checkpoint.cpp — writing a rank's shards (streamed and hashed as written), the two-file commit
// (manifest.json, then latest), and reading a checkpoint back with every file verified against
// the manifest: present, the recorded size, each unit's tensors fp32 [shard_elems], the sha256.
#include "ckpt/checkpoint.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ckpt/safetensors.hpp"
#include "ckpt/safetensors_stream.hpp"
#include "ckpt/sha256.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace zl {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kManifestName = "manifest.json";
constexpr std::string_view kLatestName = "latest";
constexpr std::string_view kRestore = "restore it or use another step";
constexpr std::string_view kRunIdKey = "run_id";

// The whole text file at `path`.
std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("cannot read {}: {}: check the path", path.string(), std::strerror(errno));
  std::ostringstream text;
  text << in.rdbuf();
  ZL_CHECK(!in.bad(), "cannot read {}: reading failed: check the disk", path.string());
  return text.str();
}

// Checks that `state` holds shard_elems floats of every unit of `layout` in each member.
void check_shapes(const ShardState& state, const std::vector<UnitLayout>& layout, int rank,
                  const fs::path& path) {
  for (const ShardTensor tensor : kShardTensors) {
    const auto& shards = shard_member(state, tensor);
    ZL_CHECK(shards.size() == layout.size(),
             "cannot write {}: rank {} gave {} units of {} but the layout has {}: pass the shard "
             "state of this layout",
             path.string(), rank, shards.size(), shard_tensor_suffix(tensor), layout.size());
    for (std::size_t u = 0; u < layout.size(); ++u) {
      ZL_CHECK(static_cast<std::int64_t>(shards[u].size()) == layout[u].shard_elems,
               "cannot write {}: rank {} gave {} elements of {} for unit {} but its shards hold "
               "{}: pass the shard state of this layout",
               path.string(), rank, shards[u].size(), shard_tensor_suffix(tensor), layout[u].name,
               layout[u].shard_elems);
    }
  }
}

// Checks one rank file against the manifest: present, its recorded size, written by the manifest's
// run (from version 2), every unit's tensors as fp32 [shard_elems], and its sha256 (last: it reads
// the whole file).
void verify_rank_file(const Manifest& manifest, const FileEntry& file) {
  const fs::path path = manifest.step_dir / file.name;
  const std::string shown = path.string();
  std::error_code error;
  ZL_CHECK(fs::is_regular_file(path, error),
           "cannot read {}: the file is missing (the manifest lists it): {}", shown, kRestore);
  const std::uint64_t size_bytes = fs::file_size(path, error);
  ZL_CHECK(!error, "cannot read {}: {}: check the path", shown, error.message());
  ZL_CHECK(size_bytes == file.size_bytes,
           "cannot read {}: it is {} bytes but the manifest records {}: the file is truncated or "
           "was replaced: {}",
           shown, size_bytes, file.size_bytes, kRestore);
  const SafetensorsIndex index = read_safetensors_index(path);
  if (manifest.format_version >= 2) {
    const auto run_id = index.metadata.find(std::string(kRunIdKey));
    ZL_CHECK(run_id != index.metadata.end(),
             "cannot read {}: its metadata has no run_id, which manifest format {} needs: the file "
             "belongs to another checkpoint: {}",
             shown, manifest.format_version, kRestore);
    ZL_CHECK(run_id->second == manifest.run_id,
             "cannot read {}: it was written by run {} but the manifest is run {}'s: the file "
             "was copied in from another run: {}",
             shown, run_id->second, manifest.run_id, kRestore);
  }
  for (const auto& unit : manifest.units) {
    for (const ShardTensor tensor : kShardTensors) {
      const std::string name = shard_tensor_name(unit.name, tensor);
      const auto found = std::ranges::find(index.tensors, name, &TensorLocation::name);
      ZL_CHECK(found != index.tensors.end(),
               "cannot read {}: it has no tensor {:?}, which the manifest's unit {:?} needs: {}",
               shown, name, unit.name, kRestore);
      ZL_CHECK(found->dtype == DType::F32 && found->shape == Shape{unit.shard_elems},
               "cannot read {}: tensor {:?} is {} {} but the manifest needs F32 [{}]: the file "
               "belongs to another checkpoint: {}",
               shown, name, safetensors_dtype(found->dtype), shape_string(found->shape),
               unit.shard_elems, kRestore);
    }
  }
  const std::string sha256 = sha256_file_hex(path);
  ZL_CHECK(
      sha256 == file.sha256,
      "cannot read {}: its sha256 is {} but the manifest records {}: the file is corrupted: {}",
      shown, sha256, file.sha256, kRestore);
}

}  // namespace

std::string_view shard_tensor_suffix(ShardTensor tensor) {
  switch (tensor) {
    case ShardTensor::Params:
      return "params";
    case ShardTensor::ExpAvg:
      return "exp_avg";
    case ShardTensor::ExpAvgSq:
      return "exp_avg_sq";
  }
  fail("unknown ShardTensor {}", static_cast<int>(tensor));
}

std::string shard_tensor_name(std::string_view unit, ShardTensor tensor) {
  return fmt::format("{}.{}", unit, shard_tensor_suffix(tensor));
}

std::vector<std::vector<float>>& shard_member(ShardState& state, ShardTensor tensor) {
  switch (tensor) {
    case ShardTensor::Params:
      return state.params;
    case ShardTensor::ExpAvg:
      return state.exp_avg;
    case ShardTensor::ExpAvgSq:
      return state.exp_avg_sq;
  }
  fail("unknown ShardTensor {}", static_cast<int>(tensor));
}

const std::vector<std::vector<float>>& shard_member(const ShardState& state, ShardTensor tensor) {
  return shard_member(const_cast<ShardState&>(state), tensor);
}

fs::path step_dir(const fs::path& dir, std::int64_t step) {
  ZL_CHECK(step >= 0, "checkpoint step {} is negative: steps count from 0", step);
  return dir / fmt::format("step-{:08}", step);
}

FileEntry write_rank_file(const fs::path& step_directory, int rank,
                          const std::vector<UnitLayout>& layout, const ShardState& state,
                          std::string_view run_id) {
  const fs::path path = step_directory / rank_file_name(rank);
  ZL_CHECK(!layout.empty() && layout.front().shard_elems > 0,
           "cannot write {}: the layout has no units: lay the model out with layout_units",
           path.string());
  const std::int64_t world = layout.front().padded_elems / layout.front().shard_elems;
  ZL_CHECK(rank >= 0 && rank < world, "cannot write {}: rank {} is outside world {}", path.string(),
           rank, world);
  check_shapes(state, layout, rank, path);
  ZL_CHECK(run_id.size() == kRunIdChars,
           "cannot write {}: run id {:?} is not {} hex digits: pass the run's new_run_id()",
           path.string(), run_id, kRunIdChars);
  std::error_code error;
  ZL_CHECK(!fs::exists(step_directory / kManifestName, error),
           "cannot write {}: step directory {} is already committed: remove it or save to another "
           "directory",
           path.string(), step_directory.string());
  fs::create_directories(step_directory, error);
  ZL_CHECK(fs::is_directory(step_directory),
           "cannot write {}: cannot create directory {}: {}: check the path and its permissions",
           path.string(), step_directory.string(), error.message());

  std::vector<TensorInfo> tensors;
  for (const auto& unit : layout) {
    for (const ShardTensor tensor : kShardTensors) {
      tensors.push_back({shard_tensor_name(unit.name, tensor), DType::F32, {unit.shard_elems}});
    }
  }
  const std::map<std::string, std::string> metadata = {
      {"format", "zerolab-shard"},
      {"rank", std::to_string(rank)},
      {"world", std::to_string(world)},
      {std::string(kRunIdKey), std::string(run_id)}};
  Sha256 hash;
  SafetensorsStreamWriter writer(path, std::move(tensors), metadata,
                                 [&hash](std::span<const std::byte> bytes) { hash.update(bytes); });
  for (std::size_t u = 0; u < layout.size(); ++u) {
    for (const ShardTensor tensor : kShardTensors) {
      writer.write_tensor(shard_tensor_name(layout[u].name, tensor),
                          std::as_bytes(std::span(shard_member(state, tensor)[u])));
    }
  }
  const std::uint64_t size_bytes = writer.commit();
  return {rank_file_name(rank), size_bytes, to_hex(hash.finish())};
}

void commit_checkpoint(const fs::path& dir, const Manifest& manifest,
                       std::span<const FileEntry> files) {
  const fs::path directory = step_dir(dir, manifest.step);
  const fs::path manifest_path = directory / kManifestName;
  Manifest committed = manifest;
  committed.files.assign(files.begin(), files.end());
  if (const auto problem = manifest_problem(committed)) {
    fail("cannot commit {}: {}: fix the manifest or the file entries", manifest_path.string(),
         *problem);
  }
  std::error_code error;
  ZL_CHECK(!fs::exists(manifest_path, error),
           "cannot commit {}: step {} is already committed: remove {} or save to another directory",
           manifest_path.string(), manifest.step, directory.string());
  for (const auto& file : committed.files) {
    const fs::path path = directory / file.name;
    const std::uint64_t size_bytes = fs::file_size(path, error);
    ZL_CHECK(!error && size_bytes == file.size_bytes,
             "cannot commit {}: {} is {} on disk but its entry says {} bytes: write every rank's "
             "file with write_rank_file first",
             manifest_path.string(), path.string(),
             error ? error.message() : fmt::format("{} bytes", size_bytes), file.size_bytes);
  }
  write_file_atomically(manifest_path, manifest_json(committed));
  write_file_atomically(dir / kLatestName, directory.filename().string() + "\n");
}

fs::path resolve_step_dir(const fs::path& path) {
  std::error_code error;
  const fs::path latest = path / kLatestName;
  if (fs::is_regular_file(latest, error)) {
    std::string name = read_text(latest);
    name.erase(name.find_last_not_of(" \t\r\n") + 1);
    ZL_CHECK(!name.empty() && name.find('/') == std::string::npos && name != "." && name != "..",
             "cannot read {}: it holds {:?}, not the name of a step directory: write the name of "
             "a complete step-* directory in it",
             latest.string(), name);
    const fs::path directory = path / name;
    ZL_CHECK(fs::is_regular_file(directory / kManifestName, error),
             "cannot read {}: it names {}, but {} does not exist: point latest at a complete "
             "step-* directory",
             latest.string(), name, (directory / kManifestName).string());
    return directory;
  }
  if (fs::is_regular_file(path / kManifestName, error)) return path;
  ZL_CHECK(fs::exists(path, error), "cannot read checkpoint {}: no such directory: check the path",
           path.string());
  fail(
      "cannot read checkpoint {}: it has neither a latest file nor a manifest.json: pass a "
      "checkpoint directory or one of its step-* directories",
      path.string());
}

Manifest read_manifest(const fs::path& path) {
  const fs::path directory = resolve_step_dir(path);
  const fs::path manifest_path = directory / kManifestName;
  Manifest manifest = parse_manifest(read_text(manifest_path), manifest_path.string());
  manifest.step_dir = directory;
  for (const auto& file : manifest.files) verify_rank_file(manifest, file);
  return manifest;
}

}  // namespace zl
