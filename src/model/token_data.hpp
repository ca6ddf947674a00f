// token_data.hpp — token sequences for GPT training: a synthetic Markov-chain language made from
// the seed, and token files (--data: nanoGPT's uint16 files and llm.c shards). Both are indexed by
// the global sample, so sample g is the same for every world size and backend (the trainer gives
// step t, rank r, row b the sample first_sample_of(t, r, W, B) + b, see data.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "model/model.hpp"
#include "model/token_shards.hpp"

namespace zl {

/// Where GPT micro-batches come from.
class TokenSource {
 public:
  virtual ~TokenSource() = default;
  /// Samples first_sample .. first_sample + rows - 1: tokens [rows, seq_len] and their next
  /// tokens y [rows, seq_len] (y[b, t] = tokens[b, t + 1] within the sample's sequence).
  /// Batch.features is seq_len and Batch.x stays empty.
  virtual Batch batch(std::int64_t first_sample, std::int64_t rows, std::int64_t seq_len) const = 0;
};

/// A synthetic language a small GPT learns in seconds: a fixed random sparse Markov chain over
/// `vocab` tokens. Token v has between 2 and 4 distinct successors (fewer if vocab is smaller),
/// each equally likely; sample g starts at a uniform token and walks the chain. Everything is a
/// pure function of (seed, stream, index) of the counter RNG:
///   successor count of v = 2 + uniform_below(seed, "tokens.successor_count", v, 3);
///   successors: uniform_below(seed, "tokens.successor", v * 32 + attempt, vocab), keeping the
///   first distinct ones;
///   token 0 of sample g = uniform_below(seed, "tokens.start", g, vocab);
///   token t + 1 = successor number uniform_below(seed, "tokens.step", g * 2^24 + t, count) of
///   token t (stream ids are stream_of of the quoted names).
/// The best possible loss is the mean of ln(count) over the chain's visits, well below ln(vocab).
class MarkovTokens final : public TokenSource {
 public:
  /// Builds the chain; throws zl::Error if vocab < 1.
  MarkovTokens(std::int64_t vocab, std::uint64_t seed);
  /// Throws zl::Error for a negative sample or row count, or seq_len outside [1, 2^24).
  Batch batch(std::int64_t first_sample, std::int64_t rows, std::int64_t seq_len) const override;
  /// The successors of `token`, in the order batch() numbers them.
  const std::vector<std::int64_t>& successors(std::int64_t token) const;

 private:
  std::int64_t vocab_;
  std::uint64_t seed_;
  std::vector<std::vector<std::int64_t>> successors_;  // [vocab][2..4]
};

/// Token files (--data): nanoGPT's raw uint16 files (prepare.py's train.bin) and llm.c shards,
/// one or several (token_shards.hpp). A window never crosses from one file into the next: file s
/// holds max(0, tokens_s - seq_len) windows (every start with a next token after the window, as
/// nanoGPT's get_batch draws them), numbered file after file in --data's order and by start within
/// a file. Sample g is window number
///   u = uniform_below(seed, stream_of("tokens.file.window"), g, total windows),
/// starting at token i of its file: x = tokens[i, i + seq_len), y = tokens[i + 1, i + seq_len + 1).
/// With one file, i = u. The files are read window by window (never loaded whole), so batch() may
/// run on several threads at once.
class TokenFile final : public TokenSource {
 public:
  /// Opens `paths` for a model of `vocab` tokens, checks each file's layout (open_token_shard) and
  /// reads every token id once; throws zl::Error naming the file for a bad file or a token id
  /// >= vocab (with its offset in tokens after the file's header), and for an empty list.
  TokenFile(std::vector<std::filesystem::path> paths, std::int64_t vocab, std::uint64_t seed);
  /// Throws zl::Error if no file holds one window of seq_len tokens plus the next token, and for
  /// a token id >= vocab in a window it reads (naming its file and offset).
  Batch batch(std::int64_t first_sample, std::int64_t rows, std::int64_t seq_len) const override;
  /// Throws zl::Error unless some file holds at least seq_len + 1 tokens.
  void check_fits(std::int64_t seq_len) const;
  /// Tokens in all the files, headers excluded.
  std::int64_t tokens_elems() const;
  /// The files, in --data's order.
  const std::vector<TokenShard>& shards() const { return shards_; }

 private:
  // Throws naming the first token id >= vocab_ of `shard` and its offset.
  void check_token_ids(const TokenShard& shard) const;

  std::vector<TokenShard> shards_;
  std::int64_t vocab_;
  std::uint64_t seed_;
};

}  // namespace zl
