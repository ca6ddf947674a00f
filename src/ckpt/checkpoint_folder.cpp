// checkpoint_folder.cpp — the lock on DIR/.lock, the committed step directories, and the removal
// of killed saves' temporaries.
#include "ckpt/checkpoint_folder.hpp"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <string>

#include "ckpt/checkpoint.hpp"
#include "core/atomic_file.hpp"
#include "core/error.hpp"

namespace fs = std::filesystem;

namespace zl {

namespace {

constexpr std::string_view kStepPrefix = "step-";

// The step a directory name stands for ("step-00000042" -> 42), or nothing.
std::optional<std::int64_t> step_of(const std::string& name) {
  if (!name.starts_with(kStepPrefix) || name.size() == kStepPrefix.size()) return std::nullopt;
  std::int64_t step = 0;
  const char* first = name.data() + kStepPrefix.size();
  const char* last = name.data() + name.size();
  const auto [end, error] = std::from_chars(first, last, step);
  if (error != std::errc() || end != last || step < 0) return std::nullopt;
  return step;
}

// A temporary file of AtomicFile: "<name>.tmp.<pid digits>".
bool is_temporary(const std::string& name) {
  const std::size_t mark = name.rfind(".tmp.");
  if (mark == std::string::npos || mark + 5 == name.size()) return false;
  return std::all_of(name.begin() + static_cast<std::ptrdiff_t>(mark + 5), name.end(),
                     [](char c) { return c >= '0' && c <= '9'; });
}

void remove_temporaries(const fs::path& dir) {
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.is_regular_file(error) && is_temporary(entry.path().filename().string())) {
      fs::remove(entry.path(), error);
    }
  }
}

}  // namespace

FileLock lock_checkpoint_folder(const fs::path& dir) {
  std::error_code error;
  fs::create_directories(dir, error);
  ZL_CHECK(fs::is_directory(dir, error),
           "cannot use checkpoint folder {}: it is not a directory and cannot be created: choose "
           "another --checkpoint-dir",
           dir.string());
  return FileLock(dir / ".lock", "checkpoint folder " + dir.string(), "save to another folder",
                  LockFileFate::Keep);
}

std::vector<std::int64_t> committed_steps(const fs::path& dir) {
  std::vector<std::int64_t> steps;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    const auto step = step_of(entry.path().filename().string());
    if (step && fs::is_regular_file(entry.path() / "manifest.json", error)) steps.push_back(*step);
  }
  std::ranges::sort(steps);
  return steps;
}

void tidy_checkpoint_folder(const fs::path& dir, std::optional<std::int64_t> resumed_step) {
  remove_temporaries(dir);
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(dir, error)) {
    if (entry.is_directory(error) && step_of(entry.path().filename().string())) {
      remove_temporaries(entry.path());
    }
  }
  if (!resumed_step) return;
  const std::string name = step_dir(dir, *resumed_step).filename().string();
  std::ifstream latest(dir / "latest");
  std::string named;
  std::getline(latest, named);
  if (named != name) write_file_atomically(dir / "latest", name + "\n");
}

}  // namespace zl
