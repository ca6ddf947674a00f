// token_shards.cpp — --data's list of files (comma-separated paths and glob patterns) and the
// check of each file's layout: nanoGPT's raw uint16 tokens or an llm.c shard, by its header.
#include "model/token_shards.hpp"

#include <glob.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <set>
#include <string>
#include <system_error>

#include "core/error.hpp"

namespace zl {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kWhatToGive = "give nanoGPT's uint16 .bin or an llm.c shard";

bool is_pattern(std::string_view entry) {
  return entry.find_first_of("*?[") != std::string_view::npos;
}

// The files `pattern` matches, sorted; throws when it matches none.
std::vector<fs::path> glob_files(const std::string& pattern) {
  glob_t matches{};
  const int status = ::glob(pattern.c_str(), 0, nullptr, &matches);
  std::vector<std::string> names(matches.gl_pathv, matches.gl_pathv + matches.gl_pathc);
  ::globfree(&matches);
  ZL_CHECK(status == 0 || status == GLOB_NOMATCH, "--data {}: the pattern could not be expanded",
           pattern);
  ZL_CHECK(!names.empty(), "--data {}: the pattern matches no file: check the path", pattern);
  std::ranges::sort(names);
  return {names.begin(), names.end()};
}

// Little-endian int32 number `index` of `header`.
std::int32_t int32_at(const std::array<unsigned char, kLlmcHeaderBytes>& header, int index) {
  const auto* bytes = header.data() + 4 * index;
  return static_cast<std::int32_t>(std::uint32_t{bytes[0]} | (std::uint32_t{bytes[1]} << 8) |
                                   (std::uint32_t{bytes[2]} << 16) |
                                   (std::uint32_t{bytes[3]} << 24));
}

// Checks an llm.c shard's version and size against its header and returns its layout.
TokenShard llmc_shard(const fs::path& path,
                      const std::array<unsigned char, kLlmcHeaderBytes>& header,
                      std::int64_t file_bytes) {
  const std::int32_t version = int32_at(header, 1);
  ZL_CHECK(version == kLlmcVersion,
           "--data {}: llm.c shard version {}, but zerolab reads version {} (uint16 GPT-2 tokens): "
           "write the shard with GPT-2's tokenizer",
           path.string(), version, kLlmcVersion);
  const std::int64_t tokens = int32_at(header, 2);
  ZL_CHECK(tokens >= 0 && kLlmcHeaderBytes + 2 * tokens == file_bytes,
           "--data {}: the llm.c header declares {} tokens ({} bytes with the header) but the file "
           "has {} bytes: it is truncated or damaged, write it again",
           path.string(), tokens, kLlmcHeaderBytes + 2 * tokens, file_bytes);
  return {.path = path, .header_bytes = kLlmcHeaderBytes, .tokens_elems = tokens};
}

}  // namespace

std::vector<fs::path> data_paths(std::string_view spec) {
  std::vector<fs::path> paths;
  std::set<fs::path> seen;
  std::size_t begin = 0;
  while (begin <= spec.size()) {
    const std::size_t end = std::min(spec.find(',', begin), spec.size());
    const std::string entry(spec.substr(begin, end - begin));
    ZL_CHECK(!entry.empty(), "--data '{}' has an empty entry: separate files with single commas",
             spec);
    const std::vector<fs::path> files =
        is_pattern(entry) ? glob_files(entry) : std::vector<fs::path>{entry};
    for (const fs::path& file : files) {
      ZL_CHECK(seen.insert(file.lexically_normal()).second,
               "--data names {} twice: name each file once", file.string());
      paths.push_back(file);
    }
    begin = end + 1;
  }
  return paths;
}

TokenShard open_token_shard(const fs::path& path) {
  std::error_code error;
  ZL_CHECK(!fs::is_directory(path, error), "--data {}: is a directory: {}", path.string(),
           kWhatToGive);
  ZL_CHECK(fs::is_regular_file(path, error), "--data {}: no such file: {}", path.string(),
           kWhatToGive);
  const auto file_bytes = static_cast<std::int64_t>(fs::file_size(path, error));
  ZL_CHECK(!error, "--data {}: cannot read its size: {}", path.string(), error.message());
  std::array<unsigned char, kLlmcHeaderBytes> header{};
  std::ifstream file(path, std::ios::binary);
  ZL_CHECK(file.good(), "--data {}: cannot open it for reading", path.string());
  file.read(reinterpret_cast<char*>(header.data()),
            static_cast<std::streamsize>(std::min(file_bytes, kLlmcHeaderBytes)));
  if (file_bytes >= 4 && int32_at(header, 0) == kLlmcMagic) {
    return llmc_shard(path, header, file_bytes);
  }
  // llm.c writes zeros after the three header fields; raw GPT-2 text never starts with 506
  // tokens of id 0 ("!"), so such a file is a shard with a wrong magic, not tokens.
  const bool llmc_like =
      file_bytes >= kLlmcHeaderBytes &&
      std::all_of(header.begin() + 12, header.end(), [](unsigned char byte) { return byte == 0; });
  ZL_CHECK(!llmc_like,
           "--data {}: bytes 12 .. 1023 are zero as in an llm.c shard header, but its magic is {} "
           "(llm.c's is {}): the file is damaged or not a shard, write it again",
           path.string(), int32_at(header, 0), kLlmcMagic);
  ZL_CHECK(file_bytes % 2 == 0,
           "--data {} has {} bytes, an odd count: a token file holds 2-byte little-endian uint16 "
           "tokens",
           path.string(), file_bytes);
  return {.path = path, .header_bytes = 0, .tokens_elems = file_bytes / 2};
}

}  // namespace zl
