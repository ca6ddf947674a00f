// output_paths.cpp — the checks of output_paths.hpp. Paths are compared absolute, with links, `.`
// and `..` resolved (std::filesystem::weakly_canonical); two existing files also by inode.
#include "cli/output_paths.hpp"

#include <fmt/format.h>

#include <string>
#include <system_error>

#include "ckpt/checkpoint_folder.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace zl {

namespace {

namespace fs = std::filesystem;

// `path` absolute, with links, `.` and `..` resolved as far as it exists, and no trailing `/`.
fs::path resolved(const fs::path& path) {
  std::error_code error;
  const fs::path absolute = fs::absolute(path, error);
  if (error) return path.lexically_normal();
  fs::path result = fs::weakly_canonical(absolute, error);
  if (error) result = absolute.lexically_normal();
  if (!result.has_filename() && result.has_relative_path()) result = result.parent_path();
  return result;
}

// True when resolved `inner` is resolved `folder` or lies inside it.
bool within(const fs::path& inner, const fs::path& folder) {
  auto part = inner.begin();
  for (const fs::path& name : folder) {
    if (part == inner.end() || *part != name) return false;
    ++part;
  }
  return true;
}

// A checkpoint folder the run names: resolved, as given, and what the run does with it.
struct NamedFolder {
  fs::path path;
  std::string shown;
  std::string_view role;  // "which --checkpoint-dir writes"
};

std::vector<NamedFolder> named_folders(const CheckpointPlan& checkpoints) {
  std::vector<NamedFolder> folders;
  if (!checkpoints.dir.empty()) {
    folders.push_back(
        {resolved(checkpoints.dir), checkpoints.dir.string(), "which --checkpoint-dir writes"});
  }
  if (!checkpoints.resume.empty()) {
    folders.push_back(
        {resolved(checkpoints.resume), checkpoints.resume.string(), "which --resume reads"});
  }
  return folders;
}

// True when `dir` holds a checkpoint: committed steps (step-N/manifest.json) or, as a step
// directory, a manifest.json.
bool holds_checkpoint(const fs::path& dir) {
  std::error_code error;
  return fs::is_regular_file(dir / "manifest.json", error) || !committed_steps(dir).empty();
}

// Refuses `file` on or inside a checkpoint folder: one the run names, or any that holds a
// checkpoint already (a save, or the next --resume, would read a replaced file).
void check_outside_checkpoints(const OutputFile& file, const std::vector<NamedFolder>& named) {
  const fs::path path = resolved(file.path);
  const auto where = [&](const fs::path& folder) {
    return path == folder ? "is the" : "lies inside";
  };
  for (const NamedFolder& folder : named) {
    ZL_CHECK(!within(path, folder.path),
             "{} {} {} checkpoint folder {}, {}: write it outside that folder", file.flag,
             file.path.string(), where(folder.path), folder.shown, folder.role);
  }
  for (fs::path folder = path;; folder = folder.parent_path()) {
    ZL_CHECK(!holds_checkpoint(folder),
             "{} {} {} checkpoint folder {}: write it outside that folder", file.flag,
             file.path.string(), where(folder), folder.string());
    if (!folder.has_relative_path()) break;  // the root
  }
}

// --checkpoint-dir: a directory, or a path where one can be created.
void check_checkpoint_dir(const fs::path& dir) {
  std::error_code error;
  if (dir.empty() || fs::is_directory(dir, error)) return;
  ZL_CHECK(!fs::exists(dir, error),
           "--checkpoint-dir {} is a file: give a directory (it is created if missing)",
           dir.string());
  check_writable(dir, "--checkpoint-dir");  // its parent must exist
}

// True when `a` and `b` name one file: one path once resolved, or one inode (a hard link).
bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code error;
  return resolved(a) == resolved(b) || fs::equivalent(a, b, error);
}

}  // namespace

std::vector<OutputFile> output_files(const TrainOutputs& outputs) {
  const std::pair<const fs::path*, const char*> named[] = {
      {&outputs.metrics, "--metrics"},     {&outputs.summary, "--summary"},
      {&outputs.save_init, "--save-init"}, {&outputs.save_final, "--save-final"},
      {&outputs.save_data, "--save-data"}, {&outputs.trace, "--trace"}};
  std::vector<OutputFile> files;
  for (const auto& [path, flag] : named) {
    if (!path->empty()) files.push_back({.path = *path, .flag = flag});
  }
  return files;
}

void check_output_paths(const TrainOutputs& outputs, const CheckpointPlan& checkpoints) {
  check_checkpoint_dir(checkpoints.dir);
  const std::vector<NamedFolder> folders = named_folders(checkpoints);
  const std::vector<OutputFile> files = output_files(outputs);
  for (const OutputFile& file : files) check_outside_checkpoints(file, folders);
  for (const auto& [path, flag] : files) check_writable(path, flag);
  // Two outputs on one file would overwrite each other (and their locks would collide).
  for (std::size_t i = 0; i < files.size(); ++i) {
    for (std::size_t j = i + 1; j < files.size(); ++j) {
      const OutputFile& a = files[i];
      const OutputFile& b = files[j];
      const std::string also =
          a.path == b.path ? "" : fmt::format(" (also named {})", b.path.string());
      ZL_CHECK(!same_file(a.path, b.path),
               "{} and {} are the same file {}{}: give each output its own path", a.flag, b.flag,
               a.path.string(), also);
    }
  }
}

}  // namespace zl
