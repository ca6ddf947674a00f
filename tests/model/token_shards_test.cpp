// token_shards_test.cpp — --data's files: an llm.c shard gives the windows its tokens give as a
// raw file, several files are windowed one after the other as documented (no window crosses
// files), --data's comma list and glob patterns name the files in order, and bad shards (wrong
// magic, wrong version, a size that disagrees with the header) are refused naming the file.
#include "model/token_shards.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "ckpt/test_files.hpp"
#include "core/rng.hpp"
#include "model/token_data.hpp"
#include "support/token_files.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;
using test::error_of;
using test::write_llmc_shard;
using test::write_tokens;

std::vector<std::uint16_t> counting_tokens(std::size_t count, std::uint16_t first) {
  std::vector<std::uint16_t> tokens(count);
  for (std::size_t i = 0; i < count; ++i) tokens[i] = static_cast<std::uint16_t>(first + i);
  return tokens;
}

TEST(TokenShards, AnLlmcShardGivesTheWindowsOfItsTokens) {
  test::TempDir dir;
  const auto tokens = counting_tokens(700, 100);
  write_tokens(dir.path() / "raw.bin", tokens);
  write_llmc_shard(dir.path() / "shard.bin", tokens);
  const TokenShard shard = open_token_shard(dir.path() / "shard.bin");
  EXPECT_EQ(shard.header_bytes, kLlmcHeaderBytes);
  EXPECT_EQ(shard.tokens_elems, 700);
  EXPECT_EQ(open_token_shard(dir.path() / "raw.bin").header_bytes, 0);
  const Batch raw = TokenFile({dir.path() / "raw.bin"}, 1024, 5).batch(3, 8, 16);
  const Batch llmc = TokenFile({dir.path() / "shard.bin"}, 1024, 5).batch(3, 8, 16);
  EXPECT_EQ(llmc.tokens, raw.tokens);
  EXPECT_EQ(llmc.y, raw.y);
  EXPECT_TRUE(std::ranges::all_of(llmc.tokens, [](std::int64_t t) { return t >= 100; }))
      << "a header byte was read as a token";
}

// Files a (10 tokens) and b (20 tokens) with T = 4 hold 6 and 16 windows: window u < 6 starts at
// a[u], window u >= 6 at b[u - 6]. A file shorter than a window adds none.
TEST(TokenShards, FilesAreWindowedOneAfterTheOther) {
  test::TempDir dir;
  const auto a = counting_tokens(10, 0);
  const auto b = counting_tokens(20, 500);
  write_llmc_shard(dir.path() / "a.bin", a);
  write_tokens(dir.path() / "short.bin", {7, 7});
  write_tokens(dir.path() / "b.bin", b);
  const TokenFile file({dir.path() / "a.bin", dir.path() / "short.bin", dir.path() / "b.bin"}, 1024,
                       9);
  EXPECT_EQ(file.tokens_elems(), 32);
  const std::int64_t T = 4;
  const Batch batch = file.batch(0, 40, T);
  bool saw_a = false, saw_b = false;
  for (std::int64_t row = 0; row < 40; ++row) {
    const auto u = static_cast<std::int64_t>(
        uniform_below(9, stream_of("tokens.file.window"), static_cast<std::uint64_t>(row), 22));
    const std::vector<std::uint16_t>& tokens = u < 6 ? a : b;
    const std::int64_t start = u < 6 ? u : u - 6;
    (u < 6 ? saw_a : saw_b) = true;
    for (std::int64_t t = 0; t < T; ++t) {
      ASSERT_EQ(batch.tokens[row * T + t], tokens[start + t]) << row;
      ASSERT_EQ(batch.y[row * T + t], tokens[start + t + 1]) << row;
    }
  }
  EXPECT_TRUE(saw_a && saw_b);
  EXPECT_EQ(error_of([&] { file.check_fits(20); }),
            "--data names 3 files, none holding more than 20 tokens, too few for one window of 20 "
            "tokens and the token after it: use longer files or a shorter sequence");
}

TEST(TokenShards, DataNamesFilesByCommaListAndGlob) {
  test::TempDir dir;
  for (const char* name : {"s_002.bin", "s_000.bin", "s_001.bin", "other.bin"}) {
    write_tokens(dir.path() / name, {1, 2});
  }
  const fs::path d = dir.path();
  EXPECT_EQ(data_paths((d / "s_*.bin").string()),
            (std::vector<fs::path>{d / "s_000.bin", d / "s_001.bin", d / "s_002.bin"}));
  EXPECT_EQ(data_paths((d / "other.bin").string() + "," + (d / "s_00[12].bin").string()),
            (std::vector<fs::path>{d / "other.bin", d / "s_001.bin", d / "s_002.bin"}));
  EXPECT_EQ(data_paths("missing.bin"), (std::vector<fs::path>{"missing.bin"}));
  EXPECT_EQ(error_of([&] { data_paths((d / "x_*.bin").string()); }),
            "--data " + (d / "x_*.bin").string() + ": the pattern matches no file: check the path");
  EXPECT_EQ(error_of([&] { data_paths("a.bin,,b.bin"); }),
            "--data 'a.bin,,b.bin' has an empty entry: separate files with single commas");
  EXPECT_EQ(error_of([&] { data_paths((d / "s_000.bin").string() + "," + (d / "s_*").string()); }),
            "--data names " + (d / "s_000.bin").string() + " twice: name each file once");
}

TEST(TokenShards, BadShardsAreRefusedNamingTheFile) {
  test::TempDir dir;
  const fs::path path = dir.path() / "shard.bin";
  const auto tokens = counting_tokens(8, 1);
  std::vector<unsigned char> bytes = test::llmc_header(8);
  const auto body = test::token_bytes(tokens);
  bytes.insert(bytes.end(), body.begin(), body.end() - 2);  // one token short
  test::write_file(path, bytes);
  EXPECT_EQ(error_of([&] { open_token_shard(path); }),
            "--data " + path.string() +
                ": the llm.c header declares 8 tokens (1040 bytes with the header) but the file "
                "has 1038 bytes: it is truncated or damaged, write it again");
  bytes = test::llmc_header(8, kLlmcMagic + 1);
  bytes.insert(bytes.end(), body.begin(), body.end());
  test::write_file(path, bytes);
  EXPECT_EQ(error_of([&] { open_token_shard(path); }),
            "--data " + path.string() +
                ": bytes 12 .. 1023 are zero as in an llm.c shard header, but its magic is "
                "20240521 (llm.c's is 20240520): the file is damaged or not a shard, write it "
                "again");
  bytes = test::llmc_header(8, kLlmcMagic, 2);
  bytes.insert(bytes.end(), body.begin(), body.end());
  test::write_file(path, bytes);
  EXPECT_EQ(error_of([&] { open_token_shard(path); }),
            "--data " + path.string() +
                ": llm.c shard version 2, but zerolab reads version 1 (uint16 GPT-2 tokens): "
                "write the shard with GPT-2's tokenizer");
  write_llmc_shard(path, {1, 2, 3, 64, 5});
  EXPECT_EQ(error_of([&] { TokenFile({path}, 64, 0); }),
            "--data " + path.string() +
                ": token 64 at offset 3 (tokens) is outside the vocabulary [0, 64): use the "
                "--vocab the file was made for (GPT-2's is 50257)");
  EXPECT_EQ(error_of([&] { TokenFile({}, 64, 0); }),
            "--data names no file: give nanoGPT's uint16 .bin or an llm.c shard");
}

}  // namespace
}  // namespace zl
