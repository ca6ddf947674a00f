// token_shards.hpp — the files behind --data: which files a --data value names (a comma-separated
// list of paths and glob patterns) and each file's layout, nanoGPT's raw uint16 tokens or an llm.c
// shard (a 256 x int32 header, then uint16 tokens), told apart by llm.c's magic number.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string_view>
#include <vector>

namespace zl {

/// llm.c's shard header (dev/data/data_common.py): 256 little-endian int32, header[0] the magic,
/// header[1] the version, header[2] the token count; the tokens follow it.
inline constexpr std::int32_t kLlmcMagic = 20240520;
/// The llm.c shard version zerolab reads: uint16 tokens (GPT-2's). Version 2 holds uint32 tokens.
inline constexpr std::int32_t kLlmcVersion = 1;
/// Bytes of an llm.c shard's header (256 int32).
inline constexpr std::int64_t kLlmcHeaderBytes = 1024;

/// One token file: its path, where its uint16 little-endian tokens start, and how many it holds.
struct TokenShard {
  std::filesystem::path path;     ///< the file
  std::int64_t header_bytes = 0;  ///< 0 for nanoGPT's raw file, kLlmcHeaderBytes for an llm.c shard
  std::int64_t tokens_elems = 0;  ///< tokens after the header
};

/// The files a --data value names, in order: comma-separated entries, each a path or a glob
/// pattern (an entry with `*`, `?` or `[`), whose matches are taken in sorted order. Throws
/// zl::Error for an empty entry, a pattern that matches no file, or a file named twice.
std::vector<std::filesystem::path> data_paths(std::string_view spec);

/// Reads `path`'s size and first bytes and tells its layout: an llm.c shard when it starts with
/// kLlmcMagic (as uint16 tokens those bytes are 54952 and 308, and 54952 is no GPT-2 token),
/// nanoGPT's raw uint16 file otherwise. Throws zl::Error naming the file for a missing file or a
/// directory, an odd byte count, an llm.c shard whose version is not kLlmcVersion or whose size
/// is not its header plus 2 bytes per token it declares, and a file whose bytes 12 .. 1023 are
/// zero as in an llm.c header but whose magic is not kLlmcMagic.
TokenShard open_token_shard(const std::filesystem::path& path);

}  // namespace zl
