// torch_adamw.cpp — finds a Python that imports torch, runs a benchmark script through the shell
// (stderr discarded: torch's warnings are not the answer) and reads its one JSON line.
#include "bench/torch_adamw.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

namespace zl::bench {

namespace {

// `text` in single quotes for /bin/sh.
std::string shell_quote(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

bool imports_torch(const std::string& python) {
  const std::string command = shell_quote(python) + " -c 'import torch' >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

// stdout of `command`, and whether it exited 0.
std::pair<std::string, bool> capture(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return {"", false};
  std::string out;
  std::array<char, 4096> chunk{};
  while (const std::size_t got = std::fread(chunk.data(), 1, chunk.size(), pipe)) {
    out.append(chunk.data(), got);
  }
  return {out, ::pclose(pipe) == 0};
}

// The interpreter to run the script with: `python`, else the first of python3 and
// /usr/bin/python3 that imports torch; empty with `note` set when there is none.
std::string find_python(const std::string& python, std::string& note) {
  if (!python.empty()) return python;
  for (const char* candidate : {"python3", "/usr/bin/python3"}) {
    if (imports_torch(candidate)) return candidate;
  }
  note =
      "no PyTorch comparison: neither python3 nor /usr/bin/python3 can import torch "
      "(Debian: apt-get install python3-torch)";
  return "";
}

// Runs `python script arguments` and returns its one JSON object; null with `note` set when the
// script fails or says torch is missing.
nlohmann::json run_script(const std::string& script, const std::string& python,
                          const std::string& arguments, std::string& note) {
  const std::string command =
      fmt::format("{} {} {} 2>/dev/null", shell_quote(python), shell_quote(script), arguments);
  const auto [out, ok] = capture(command);
  auto json = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (!ok || json.is_discarded() || !json.is_object()) {
    note = fmt::format("no PyTorch comparison: {} failed", command);
    return nullptr;
  }
  if (json.value("torch", nlohmann::json()).is_null()) {
    note = fmt::format("no PyTorch comparison: {}", json.value("reason", "torch missing"));
    return nullptr;
  }
  return json;
}

}  // namespace

TorchAdamResult run_torch_adamw(const std::string& script, const std::string& python,
                                std::int64_t params_elems, int threads, int repeats) {
  TorchAdamResult result;
  if (!std::filesystem::exists(script)) {
    result.note = fmt::format("no PyTorch comparison: {} not found (give --torch-script)", script);
    return result;
  }
  result.python = find_python(python, result.note);
  if (result.python.empty()) return result;
  const auto json = run_script(
      script, result.python,
      fmt::format("--params {} --threads {} --repeats {}", params_elems, threads, repeats),
      result.note);
  if (json.is_null()) return result;
  result.ran = true;
  result.version = json.value("torch", "");
  result.single_tensor_ms = json.value("single_tensor_ms", 0.0);
  result.foreach_ms = json.value("foreach_ms", 0.0);
  return result;
}

TorchCudaAdamResult run_torch_adamw_cuda(const std::string& script, const std::string& python,
                                         const std::vector<std::int64_t>& tensor_elems, int warmup,
                                         int repeats) {
  TorchCudaAdamResult result;
  if (!std::filesystem::exists(script)) {
    result.note = fmt::format("no PyTorch comparison: {} not found (give --torch-script)", script);
    return result;
  }
  result.python = find_python(python, result.note);
  if (result.python.empty()) return result;
  const auto json = run_script(script, result.python,
                               fmt::format("--sizes {} --warmup {} --repeats {}",
                                           fmt::join(tensor_elems, ","), warmup, repeats),
                               result.note);
  if (json.is_null()) return result;
  result.ran = true;
  result.version = json.value("torch", "");
  result.ms = json.value("ms", 0.0);
  result.best_ms = json.value("best_ms", 0.0);
  result.gbps = json.value("gbps", 0.0);
  result.copy_gbps = json.value("copy_gbps", 0.0);
  return result;
}

}  // namespace zl::bench
