// token_files.hpp — token files for the --data tests: nanoGPT's raw uint16 file and llm.c's shard
// (a 256 x int32 header: magic, version, token count; then the uint16 tokens).
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "ckpt/test_files.hpp"
#include "model/token_shards.hpp"

namespace zl::test {

/// `tokens` as uint16 little-endian bytes.
inline std::vector<unsigned char> token_bytes(const std::vector<std::uint16_t>& tokens) {
  std::vector<unsigned char> bytes;
  for (const auto token : tokens) {
    bytes.push_back(static_cast<unsigned char>(token & 0xFF));
    bytes.push_back(static_cast<unsigned char>(token >> 8));
  }
  return bytes;
}

/// Writes `tokens` as nanoGPT's raw uint16 file.
inline void write_tokens(const std::filesystem::path& path,
                         const std::vector<std::uint16_t>& tokens) {
  write_file(path, token_bytes(tokens));
}

/// llm.c's header for `tokens_elems` tokens, with another `magic` or `version` to test refusals.
inline std::vector<unsigned char> llmc_header(std::int64_t tokens_elems,
                                              std::int32_t magic = kLlmcMagic,
                                              std::int32_t version = kLlmcVersion) {
  std::vector<unsigned char> header(static_cast<std::size_t>(kLlmcHeaderBytes), 0);
  const std::int64_t fields[] = {magic, version, tokens_elems};
  for (std::size_t i = 0; i < 3; ++i) {
    for (std::size_t byte = 0; byte < 4; ++byte) {
      header[4 * i + byte] = static_cast<unsigned char>((fields[i] >> (8 * byte)) & 0xFF);
    }
  }
  return header;
}

/// Writes `tokens` as an llm.c shard (dev/data/data_common.py's write_datafile).
inline void write_llmc_shard(const std::filesystem::path& path,
                             const std::vector<std::uint16_t>& tokens) {
  std::vector<unsigned char> bytes = llmc_header(static_cast<std::int64_t>(tokens.size()));
  const std::vector<unsigned char> body = token_bytes(tokens);
  bytes.insert(bytes.end(), body.begin(), body.end());
  write_file(path, bytes);
}

}  // namespace zl::test
