// torch_adamw.cpp — finds a Python that imports torch, runs the benchmark script through the
// shell (stderr discarded: torch's warnings are not the answer) and reads its one JSON line.
#include "bench/torch_adamw.hpp"

#include <fmt/format.h>

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

}  // namespace

TorchAdamResult run_torch_adamw(const std::string& script, const std::string& python,
                                std::int64_t params_elems, int threads, int repeats) {
  TorchAdamResult result;
  if (!std::filesystem::exists(script)) {
    result.note = fmt::format("no PyTorch comparison: {} not found (give --torch-script)", script);
    return result;
  }
  if (!python.empty()) {
    result.python = python;
  } else {
    for (const char* candidate : {"python3", "/usr/bin/python3"}) {
      if (imports_torch(candidate)) {
        result.python = candidate;
        break;
      }
    }
    if (result.python.empty()) {
      result.note =
          "no PyTorch comparison: neither python3 nor /usr/bin/python3 can import torch "
          "(Debian: apt-get install python3-torch)";
      return result;
    }
  }
  const std::string command =
      fmt::format("{} {} --params {} --threads {} --repeats {} 2>/dev/null",
                  shell_quote(result.python), shell_quote(script), params_elems, threads, repeats);
  const auto [out, ok] = capture(command);
  const auto json = nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
  if (!ok || json.is_discarded() || !json.is_object()) {
    result.note = fmt::format("no PyTorch comparison: {} failed", command);
    return result;
  }
  if (json.value("torch", nlohmann::json()).is_null()) {
    result.note = fmt::format("no PyTorch comparison: {}", json.value("reason", "torch missing"));
    return result;
  }
  result.ran = true;
  result.version = json.value("torch", "");
  result.single_tensor_ms = json.value("single_tensor_ms", 0.0);
  result.foreach_ms = json.value("foreach_ms", 0.0);
  return result;
}

}  // namespace zl::bench
