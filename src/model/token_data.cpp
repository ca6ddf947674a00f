// token_data.cpp — the Markov-chain language and the uint16 token-file reader. Every choice is a
// counter-RNG draw indexed by the global sample, never by the rank or the batch a sample lands in.
#include "model/token_data.hpp"

#include <algorithm>
#include <fstream>
#include <system_error>
#include <utility>

#include "core/error.hpp"
#include "core/rng.hpp"

namespace zl {

namespace {

constexpr std::uint64_t kSuccessorAttempts = 32;  // draws per token to find distinct successors
constexpr std::int64_t kMaxSeqLen = std::int64_t{1} << 24;

void check_samples(std::int64_t first_sample, std::int64_t rows, std::int64_t seq_len) {
  ZL_CHECK(first_sample >= 0 && rows >= 0,
           "samples {} .. {} are invalid: the first sample and the row count need to be >= 0",
           first_sample, first_sample + rows - 1);
  ZL_CHECK(seq_len >= 1 && seq_len < kMaxSeqLen,
           "a sequence length of {} tokens is invalid: use 1 .. {}", seq_len, kMaxSeqLen - 1);
}

Batch empty_batch(std::int64_t rows, std::int64_t seq_len) {
  Batch out{.rows = rows, .features = seq_len, .x = {}, .y = {}, .tokens = {}};
  out.tokens.resize(static_cast<std::size_t>(rows * seq_len));
  out.y.resize(static_cast<std::size_t>(rows * seq_len));
  return out;
}

}  // namespace

MarkovTokens::MarkovTokens(std::int64_t vocab, std::uint64_t seed) : vocab_(vocab), seed_(seed) {
  ZL_CHECK(vocab >= 1, "--vocab {} is invalid: use a vocabulary of >= 1 token", vocab);
  const std::uint64_t count_stream = stream_of("tokens.successor_count");
  const std::uint64_t successor_stream = stream_of("tokens.successor");
  const auto vocab_count = static_cast<std::uint64_t>(vocab);
  successors_.resize(static_cast<std::size_t>(vocab));
  for (std::uint64_t v = 0; v < vocab_count; ++v) {
    const std::uint64_t wanted = std::min(2 + uniform_below(seed, count_stream, v, 3), vocab_count);
    auto& next = successors_[v];
    for (std::uint64_t attempt = 0; attempt < kSuccessorAttempts && next.size() < wanted;
         ++attempt) {
      const auto candidate = static_cast<std::int64_t>(
          uniform_below(seed, successor_stream, v * kSuccessorAttempts + attempt, vocab_count));
      if (std::find(next.begin(), next.end(), candidate) == next.end()) next.push_back(candidate);
    }
  }
}

const std::vector<std::int64_t>& MarkovTokens::successors(std::int64_t token) const {
  ZL_CHECK(token >= 0 && token < vocab_, "token {} is outside the vocabulary [0, {})", token,
           vocab_);
  return successors_[static_cast<std::size_t>(token)];
}

Batch MarkovTokens::batch(std::int64_t first_sample, std::int64_t rows,
                          std::int64_t seq_len) const {
  check_samples(first_sample, rows, seq_len);
  const std::uint64_t start_stream = stream_of("tokens.start");
  const std::uint64_t step_stream = stream_of("tokens.step");
  Batch out = empty_batch(rows, seq_len);
  for (std::int64_t b = 0; b < rows; ++b) {
    const auto g = static_cast<std::uint64_t>(first_sample + b);
    // The sample is a walk of seq_len + 1 tokens; x is its first seq_len, y its last seq_len.
    auto token = static_cast<std::int64_t>(
        uniform_below(seed_, start_stream, g, static_cast<std::uint64_t>(vocab_)));
    for (std::int64_t t = 0; t < seq_len; ++t) {
      const auto& next = successors_[static_cast<std::size_t>(token)];
      const std::uint64_t index =
          g * static_cast<std::uint64_t>(kMaxSeqLen) + static_cast<std::uint64_t>(t);
      const std::uint64_t pick = uniform_below(seed_, step_stream, index, next.size());
      out.tokens[static_cast<std::size_t>(b * seq_len + t)] = token;
      token = next[pick];
      out.y[static_cast<std::size_t>(b * seq_len + t)] = token;
    }
  }
  return out;
}

TokenFile::TokenFile(std::filesystem::path path, std::int64_t vocab, std::uint64_t seed)
    : path_(std::move(path)), vocab_(vocab), seed_(seed) {
  ZL_CHECK(vocab >= 1, "--vocab {} is invalid: use a vocabulary of >= 1 token", vocab);
  std::error_code error;
  ZL_CHECK(!std::filesystem::is_directory(path_, error),
           "--data {}: is a directory: give a uint16 token file (nanoGPT's train.bin)",
           path_.string());
  ZL_CHECK(std::filesystem::is_regular_file(path_, error),
           "--data {}: no such file: give a uint16 token file (nanoGPT's train.bin)",
           path_.string());
  const std::uintmax_t bytes = std::filesystem::file_size(path_, error);
  ZL_CHECK(!error, "--data {}: cannot read its size: {}", path_.string(), error.message());
  ZL_CHECK(bytes % 2 == 0,
           "--data {} has {} bytes, an odd count: a token file holds 2-byte little-endian uint16 "
           "tokens",
           path_.string(), bytes);
  tokens_elems_ = static_cast<std::int64_t>(bytes / 2);
  check_token_ids();
}

void TokenFile::check_token_ids() const {
  if (vocab_ > 0xFFFF) return;  // every uint16 is a token
  std::ifstream file(path_, std::ios::binary);
  ZL_CHECK(file.good(), "--data {}: cannot open it for reading", path_.string());
  constexpr std::int64_t kChunkTokens = 1 << 20;
  std::vector<unsigned char> bytes(static_cast<std::size_t>(2 * kChunkTokens));
  for (std::int64_t first = 0; first < tokens_elems_; first += kChunkTokens) {
    const std::int64_t count = std::min(kChunkTokens, tokens_elems_ - first);
    file.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(2 * count));
    ZL_CHECK(file.good(), "--data {}: reading tokens {} .. {} failed", path_.string(), first,
             first + count);
    for (std::int64_t i = 0; i < count; ++i) {
      const std::int64_t token = bytes[2 * i] | (std::int64_t{bytes[2 * i + 1]} << 8);
      ZL_CHECK(token < vocab_,
               "--data {}: token {} at offset {} (tokens) is outside the vocabulary [0, {}): use "
               "the --vocab the file was made for (GPT-2's is 50257)",
               path_.string(), token, first + i, vocab_);
    }
  }
}

void TokenFile::check_fits(std::int64_t seq_len) const {
  ZL_CHECK(tokens_elems_ >= seq_len + 1,
           "--data {} holds {} tokens, too few for one window of {} tokens and the token after it: "
           "use a longer file or a shorter sequence",
           path_.string(), tokens_elems_, seq_len);
}

Batch TokenFile::batch(std::int64_t first_sample, std::int64_t rows, std::int64_t seq_len) const {
  check_samples(first_sample, rows, seq_len);
  check_fits(seq_len);
  const std::uint64_t window_stream = stream_of("tokens.file.window");
  const auto starts = static_cast<std::uint64_t>(tokens_elems_ - seq_len);
  std::ifstream file(path_, std::ios::binary);
  ZL_CHECK(file.good(), "--data {}: cannot open it for reading", path_.string());
  Batch out = empty_batch(rows, seq_len);
  std::vector<unsigned char> bytes(static_cast<std::size_t>(2 * (seq_len + 1)));
  for (std::int64_t b = 0; b < rows; ++b) {
    const auto g = static_cast<std::uint64_t>(first_sample + b);
    const auto start = static_cast<std::int64_t>(uniform_below(seed_, window_stream, g, starts));
    file.seekg(2 * start);
    file.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    ZL_CHECK(file.good(), "--data {}: reading tokens {} .. {} failed", path_.string(), start,
             start + seq_len);
    // window [seq_len + 1]: x is its first seq_len tokens, y its last seq_len.
    for (std::int64_t i = 0; i <= seq_len; ++i) {
      const std::int64_t token = bytes[2 * i] | (std::int64_t{bytes[2 * i + 1]} << 8);
      ZL_CHECK(token < vocab_,
               "--data {}: token {} at offset {} (tokens) is outside the vocabulary [0, {}): use "
               "the --vocab the file was made for (GPT-2's is 50257)",
               path_.string(), token, start + i, vocab_);
      if (i < seq_len) out.tokens[static_cast<std::size_t>(b * seq_len + i)] = token;
      if (i > 0) out.y[static_cast<std::size_t>(b * seq_len + i - 1)] = token;
    }
  }
  return out;
}

}  // namespace zl
