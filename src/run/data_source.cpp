// data_source.cpp — the MLP's classification task or the GPT's token source (the Markov language,
// or --data's token files), cut into each rank's micro-batches.
#include "run/data_source.hpp"

#include <algorithm>
#include <functional>
#include <memory>

#include "model/data.hpp"
#include "model/token_data.hpp"

namespace zl {

namespace {

// Samples first .. first + rows - 1 of the run's task, in windows of block_size tokens for the GPT.
using SampleFn = std::function<Batch(std::int64_t first, std::int64_t rows)>;

SampleFn sample_source(const TrainConfig& config) {
  if (config.model == ModelKind::Mlp) {
    const ClassificationTask task{
        .features = config.mlp.in, .classes = config.mlp.classes, .seed = config.seed};
    return [task](std::int64_t first, std::int64_t rows) { return task.batch(first, rows); };
  }
  std::shared_ptr<const TokenSource> tokens;
  if (config.data.empty()) {
    tokens = std::make_shared<MarkovTokens>(config.gpt.vocab, config.seed);
  } else {
    auto file =
        std::make_shared<TokenFile>(data_paths(config.data), config.gpt.vocab, config.seed);
    file->check_fits(config.gpt.block_size);
    tokens = file;
  }
  return [tokens, seq_len = config.gpt.block_size](std::int64_t first, std::int64_t rows) {
    return tokens->batch(first, rows, seq_len);
  };
}

// Elements one sample adds to each of UsedData's vectors: {x, y, tokens}.
struct SampleElems {
  std::int64_t x = 0, y = 0, tokens = 0;
};

SampleElems sample_elems(const TrainConfig& config) {
  if (config.model == ModelKind::Gpt) return {0, config.gpt.block_size, config.gpt.block_size};
  return {config.mlp.in, 1, 0};
}

}  // namespace

void size_used_data(const TrainConfig& config, std::int64_t rows, UsedData& used) {
  const SampleElems elems = sample_elems(config);
  used.x.resize(static_cast<std::size_t>(rows * elems.x));
  used.y.resize(static_cast<std::size_t>(rows * elems.y));
  used.tokens.resize(static_cast<std::size_t>(rows * elems.tokens));
}

BatchFn batch_source(const TrainConfig& config, std::int64_t first_step,
                     std::int64_t first_sample, UsedData* used) {
  const SampleFn samples = sample_source(config);
  const SampleElems elems = sample_elems(config);
  const std::int64_t first_micro_step = first_step * config.features.grad_accum_steps;
  return [samples, elems, world = config.world, micro_batch = config.micro_batch, first_sample,
          first_micro_step, used](std::int64_t micro_step, int rank) {
    const std::int64_t row =
        first_sample_of(micro_step - first_micro_step, rank, world, micro_batch);
    Batch batch = samples(first_sample + row, micro_batch);
    if (used != nullptr) {  // rows of different ranks are disjoint, so threads never overlap
      std::ranges::copy(batch.x, used->x.begin() + row * elems.x);
      std::ranges::copy(batch.y, used->y.begin() + row * elems.y);
      std::ranges::copy(batch.tokens, used->tokens.begin() + row * elems.tokens);
    }
    return batch;
  };
}

}  // namespace zl
