// token_data.cpp — the Markov-chain language and the token-file reader (nanoGPT's uint16 files and
// llm.c shards). Every choice is a counter-RNG draw indexed by the global sample, never by the
// rank or the batch a sample lands in.
#include "model/token_data.hpp"

#include <algorithm>
#include <fstream>

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

// Token `i` of little-endian uint16 `bytes`.
std::int64_t token_at(const std::vector<unsigned char>& bytes, std::int64_t i) {
  const auto at = static_cast<std::size_t>(2 * i);
  return bytes[at] | (std::int64_t{bytes[at + 1]} << 8);
}

void check_token(const TokenShard& shard, std::int64_t token, std::int64_t offset,
                 std::int64_t vocab) {
  ZL_CHECK(token < vocab,
           "--data {}: token {} at offset {} (tokens) is outside the vocabulary [0, {}): use the "
           "--vocab the file was made for (GPT-2's is 50257)",
           shard.path.string(), token, offset, vocab);
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

TokenFile::TokenFile(std::vector<std::filesystem::path> paths, std::int64_t vocab,
                     std::uint64_t seed)
    : vocab_(vocab), seed_(seed) {
  ZL_CHECK(vocab >= 1, "--vocab {} is invalid: use a vocabulary of >= 1 token", vocab);
  ZL_CHECK(!paths.empty(), "--data names no file: give nanoGPT's uint16 .bin or an llm.c shard");
  for (const auto& path : paths) shards_.push_back(open_token_shard(path));
  for (const auto& shard : shards_) check_token_ids(shard);
}

std::int64_t TokenFile::tokens_elems() const {
  std::int64_t total = 0;
  for (const auto& shard : shards_) total += shard.tokens_elems;
  return total;
}

void TokenFile::check_token_ids(const TokenShard& shard) const {
  if (vocab_ > 0xFFFF) return;  // every uint16 is a token
  std::ifstream file(shard.path, std::ios::binary);
  ZL_CHECK(file.good(), "--data {}: cannot open it for reading", shard.path.string());
  file.seekg(shard.header_bytes);
  constexpr std::int64_t kChunkTokens = 1 << 20;
  std::vector<unsigned char> bytes(static_cast<std::size_t>(2 * kChunkTokens));
  for (std::int64_t first = 0; first < shard.tokens_elems; first += kChunkTokens) {
    const std::int64_t count = std::min(kChunkTokens, shard.tokens_elems - first);
    file.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(2 * count));
    ZL_CHECK(file.good(), "--data {}: reading tokens {} .. {} failed", shard.path.string(), first,
             first + count);
    for (std::int64_t i = 0; i < count; ++i) {
      check_token(shard, token_at(bytes, i), first + i, vocab_);
    }
  }
}

void TokenFile::check_fits(std::int64_t seq_len) const {
  const bool fits = std::ranges::any_of(
      shards_, [seq_len](const TokenShard& shard) { return shard.tokens_elems >= seq_len + 1; });
  if (shards_.size() == 1) {
    ZL_CHECK(fits,
             "--data {} holds {} tokens, too few for one window of {} tokens and the token after "
             "it: use a longer file or a shorter sequence",
             shards_[0].path.string(), shards_[0].tokens_elems, seq_len);
  }
  ZL_CHECK(fits,
           "--data names {} files, none holding more than {} tokens, too few for one window of {} "
           "tokens and the token after it: use longer files or a shorter sequence",
           shards_.size(), seq_len, seq_len);
}

Batch TokenFile::batch(std::int64_t first_sample, std::int64_t rows, std::int64_t seq_len) const {
  check_samples(first_sample, rows, seq_len);
  check_fits(seq_len);
  // windows_before[s]: windows in the files before file s; the last entry is the total.
  std::vector<std::int64_t> windows_before{0};
  for (const auto& shard : shards_) {
    windows_before.push_back(windows_before.back() +
                             std::max<std::int64_t>(0, shard.tokens_elems - seq_len));
  }
  const std::uint64_t window_stream = stream_of("tokens.file.window");
  const auto windows = static_cast<std::uint64_t>(windows_before.back());
  std::vector<std::ifstream> files(shards_.size());  // opened when a window first needs them
  Batch out = empty_batch(rows, seq_len);
  std::vector<unsigned char> bytes(static_cast<std::size_t>(2 * (seq_len + 1)));
  for (std::int64_t b = 0; b < rows; ++b) {
    const auto g = static_cast<std::uint64_t>(first_sample + b);
    const auto window = static_cast<std::int64_t>(uniform_below(seed_, window_stream, g, windows));
    const auto s = static_cast<std::size_t>(
        std::ranges::upper_bound(windows_before, window) - windows_before.begin() - 1);
    const TokenShard& shard = shards_[s];
    const std::int64_t start = window - windows_before[s];
    std::ifstream& file = files[s];
    if (!file.is_open()) file.open(shard.path, std::ios::binary);
    file.seekg(shard.header_bytes + 2 * start);
    file.read(reinterpret_cast<char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    ZL_CHECK(file.good(), "--data {}: reading tokens {} .. {} failed", shard.path.string(), start,
             start + seq_len);
    // window [seq_len + 1]: x is its first seq_len tokens, y its last seq_len.
    for (std::int64_t i = 0; i <= seq_len; ++i) {
      const std::int64_t token = token_at(bytes, i);
      check_token(shard, token, start + i, vocab_);
      if (i < seq_len) out.tokens[static_cast<std::size_t>(b * seq_len + i)] = token;
      if (i > 0) out.y[static_cast<std::size_t>(b * seq_len + i - 1)] = token;
    }
  }
  return out;
}

}  // namespace zl
