// token_data_test.cpp — GPT token data: the Markov-chain language follows its documented formula,
// sample g is the same however the global batch is cut into ranks, and the uint16 token-file
// reader takes the documented windows and rejects bad files with a clear message.
#include "model/token_data.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "ckpt/test_files.hpp"
#include "core/rng.hpp"
#include "model/data.hpp"
#include "support/token_files.hpp"

namespace zl {
namespace {

using test::error_of;
using test::write_tokens;
using ::testing::HasSubstr;

// Row b of a batch as (tokens, y).
std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>> row_of(const Batch& batch,
                                                                       std::int64_t b) {
  const auto T = static_cast<std::ptrdiff_t>(batch.features);
  return {{batch.tokens.begin() + b * T, batch.tokens.begin() + (b + 1) * T},
          {batch.y.begin() + b * T, batch.y.begin() + (b + 1) * T}};
}

TEST(MarkovTokens, FollowsTheDocumentedChain) {
  const MarkovTokens data(64, 5);
  for (std::int64_t v = 0; v < 64; ++v) {
    const auto& next = data.successors(v);
    EXPECT_EQ(next.size(), 2 + uniform_below(5, stream_of("tokens.successor_count"), v, 3));
    EXPECT_EQ(std::set<std::int64_t>(next.begin(), next.end()).size(), next.size()) << v;
    for (const auto s : next) EXPECT_TRUE(s >= 0 && s < 64);
  }
  const Batch batch = data.batch(10, 4, 12);
  EXPECT_EQ(batch.rows, 4);
  EXPECT_EQ(batch.features, 12);
  EXPECT_TRUE(batch.x.empty());
  for (std::int64_t b = 0; b < 4; ++b) {
    const auto [tokens, y] = row_of(batch, b);
    const auto g = static_cast<std::uint64_t>(10 + b);
    EXPECT_EQ(tokens[0],
              static_cast<std::int64_t>(uniform_below(5, stream_of("tokens.start"), g, 64)));
    for (std::size_t t = 0; t < tokens.size(); ++t) {
      const auto& next = data.successors(tokens[t]);
      const auto pick = uniform_below(5, stream_of("tokens.step"), (g << 24) + t, next.size());
      EXPECT_EQ(y[t], next[pick]) << "sample " << g << " position " << t;
      if (t + 1 < tokens.size()) {
        EXPECT_EQ(tokens[t + 1], y[t]);  // y is the next token
      }
    }
  }
  // A longer sequence of the same sample starts with the shorter one.
  const auto [short_tokens, short_y] = row_of(data.batch(3, 1, 5), 0);
  const auto [long_tokens, long_y] = row_of(data.batch(3, 1, 9), 0);
  EXPECT_TRUE(std::equal(short_tokens.begin(), short_tokens.end(), long_tokens.begin()));
  EXPECT_TRUE(std::equal(short_y.begin(), short_y.end(), long_y.begin()));
  EXPECT_NE(MarkovTokens(64, 6).batch(10, 4, 12).tokens, batch.tokens);
}

TEST(MarkovTokens, SampleIsTheSameForEveryWorldSize) {
  // 3 steps of a global batch of 8: W ranks with micro-batches of 8 / W. Sample g must come out
  // the same whichever rank and step it lands on.
  const MarkovTokens data(32, 7);
  std::map<std::int64_t, std::vector<std::int64_t>> seen;  // sample -> tokens then y
  for (const int world : {1, 2, 4, 8}) {
    const std::int64_t micro_batch = 8 / world;
    for (std::int64_t step = 0; step < 3; ++step) {
      for (int rank = 0; rank < world; ++rank) {
        const std::int64_t first = first_sample_of(step, rank, world, micro_batch);
        const Batch batch = data.batch(first, micro_batch, 6);
        for (std::int64_t b = 0; b < micro_batch; ++b) {
          auto [tokens, y] = row_of(batch, b);
          tokens.insert(tokens.end(), y.begin(), y.end());
          const auto [it, inserted] = seen.emplace(first + b, tokens);
          if (!inserted) {
            EXPECT_EQ(it->second, tokens) << "sample " << first + b << " W " << world;
          }
        }
      }
    }
  }
  EXPECT_EQ(seen.size(), 24u);
}

TEST(MarkovTokens, RejectsBadArgumentsWithAMessage) {
  EXPECT_EQ(error_of([] { MarkovTokens(0, 1); }),
            "--vocab 0 is invalid: use a vocabulary of >= 1 token");
  const MarkovTokens data(8, 1);
  EXPECT_THAT(error_of([&] { data.batch(-1, 2, 4); }), HasSubstr("samples -1 .. 0 are invalid"));
  EXPECT_EQ(error_of([&] { data.batch(0, 2, 0); }),
            "a sequence length of 0 tokens is invalid: use 1 .. 16777215");
  // A vocabulary of 1: every token is 0, and the chain still walks.
  EXPECT_EQ(MarkovTokens(1, 1).batch(0, 1, 3).y, (std::vector<std::int64_t>{0, 0, 0}));
}

TEST(TokenFile, SampleIsTheDocumentedWindow) {
  test::TempDir dir;
  const auto path = dir.path() / "train.bin";
  std::vector<std::uint16_t> tokens(40);
  for (std::size_t i = 0; i < tokens.size(); ++i)
    tokens[i] = static_cast<std::uint16_t>(300 + 7 * i);
  tokens[39] = 50256;  // GPT-2's <|endoftext|>, two bytes apart
  write_tokens(path, tokens);
  const TokenFile file({path}, 50257, 11);
  EXPECT_EQ(file.tokens_elems(), 40);
  const std::int64_t T = 8;
  const Batch batch = file.batch(5, 6, T);
  for (std::int64_t b = 0; b < 6; ++b) {
    // Window start i = uniform_below(seed, "tokens.file.window", g, tokens - T).
    const auto start = uniform_below(11, stream_of("tokens.file.window"), 5 + b, 40 - T);
    const auto [x, y] = row_of(batch, b);
    for (std::int64_t t = 0; t < T; ++t) {
      EXPECT_EQ(x[t], tokens[start + t]);
      EXPECT_EQ(y[t], tokens[start + t + 1]);
    }
  }
  // Sample g does not depend on the batch it is in.
  const Batch single = file.batch(7, 1, T);
  EXPECT_EQ(row_of(single, 0), row_of(batch, 2));
  // The window may end on the last token: a file of exactly T + 1 tokens has one sample.
  write_tokens(path, {1, 2, 3});
  EXPECT_EQ(TokenFile({path}, 4, 0).batch(9, 2, 2).y, (std::vector<std::int64_t>{2, 3, 2, 3}));
}

TEST(TokenFile, RejectsBadFilesWithAMessage) {
  test::TempDir dir;
  const auto path = dir.path() / "tokens.bin";
  EXPECT_EQ(error_of([&] { TokenFile({path}, 64, 0); }),
            "--data " + path.string() +
                ": no such file: give nanoGPT's uint16 .bin or an llm.c shard");
  test::write_file(path, {1, 0, 2, 0, 3});
  EXPECT_EQ(error_of([&] { TokenFile({path}, 64, 0); }),
            "--data " + path.string() +
                " has 5 bytes, an odd count: a token file holds 2-byte "
                "little-endian uint16 tokens");
  write_tokens(path, {1, 2, 3, 4});
  const TokenFile short_file({path}, 64, 0);
  EXPECT_EQ(error_of([&] { short_file.batch(0, 1, 4); }),
            "--data " + path.string() +
                " holds 4 tokens, too few for one window of 4 tokens and "
                "the token after it: use a longer file or a shorter sequence");
  EXPECT_NO_THROW(short_file.check_fits(3));
  write_tokens(path, {1, 2, 64, 4});
  EXPECT_EQ(error_of([&] { TokenFile({path}, 64, 0).batch(0, 1, 3); }),
            "--data " + path.string() +
                ": token 64 at offset 2 (tokens) is outside the "
                "vocabulary [0, 64): use the --vocab the file was made for (GPT-2's is 50257)");
  EXPECT_THROW(TokenFile({path}, 0, 0), Error);
  // Every id is read once when the file opens, not only those a sampled window happens to hold.
  std::vector<std::uint16_t> long_file(3000, 7);
  long_file.back() = 64;
  write_tokens(path, long_file);
  EXPECT_EQ(error_of([&] { TokenFile({path}, 64, 0); }),
            "--data " + path.string() +
                ": token 64 at offset 2999 (tokens) is outside the vocabulary [0, 64): use the "
                "--vocab the file was made for (GPT-2's is 50257)");
  EXPECT_EQ(error_of([&] { TokenFile({dir.path()}, 64, 0); }),
            "--data " + dir.path().string() +
                ": is a directory: give nanoGPT's uint16 .bin or an llm.c shard");
}

}  // namespace
}  // namespace zl
