// token_data.hpp — token sequences for GPT training: a synthetic Markov-chain language made from
// the seed, and nanoGPT's uint16 token files (--data FILE). Both are indexed by the global sample,
// so sample g is the same for every world size and backend (the trainer gives step t, rank r,
// row b the sample first_sample_of(t, r, W, B) + b, see data.hpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "model/model.hpp"

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

/// nanoGPT's token file (prepare.py's train.bin): uint16 little-endian token ids back to back.
/// Sample g is the window that starts at token
///   i = uniform_below(seed, stream_of("tokens.file.window"), g, tokens - seq_len)
/// (any start with a next token after the window, as nanoGPT's get_batch draws it):
/// x = tokens[i, i + seq_len), y = tokens[i + 1, i + seq_len + 1). The file is read window by
/// window (never loaded whole), so batch() may run on several threads at once.
class TokenFile final : public TokenSource {
 public:
  /// Opens `path` for a model of `vocab` tokens and reads every token id once; throws zl::Error
  /// for a missing file, a directory, one with an odd number of bytes, or a token id >= vocab
  /// (naming its offset in the file).
  TokenFile(std::filesystem::path path, std::int64_t vocab, std::uint64_t seed);
  /// Throws zl::Error if the file is too short for one window of seq_len tokens plus the next
  /// token, and for a token id >= vocab in a window it reads (naming its offset in the file).
  Batch batch(std::int64_t first_sample, std::int64_t rows, std::int64_t seq_len) const override;
  /// Throws zl::Error unless the file holds at least seq_len + 1 tokens.
  void check_fits(std::int64_t seq_len) const;
  /// Tokens in the file (its bytes / 2).
  std::int64_t tokens_elems() const { return tokens_elems_; }

 private:
  // Throws naming the first token id >= vocab_ and its offset.
  void check_token_ids() const;

  std::filesystem::path path_;
  std::int64_t vocab_;
  std::uint64_t seed_;
  std::int64_t tokens_elems_ = 0;
};

}  // namespace zl
