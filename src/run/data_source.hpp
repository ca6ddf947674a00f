// data_source.hpp — the samples a run's engines draw: micro-step m, rank r takes rows counted by
// global sample index, so every world size, backend and resumed run sees the same data; with
// --save-data each batch is also copied into the run's UsedData.
#pragma once

#include <cstdint>

#include "engines/engine.hpp"
#include "run/train.hpp"

namespace zl {

/// Sizes `used` for `rows` samples of `config`'s model (x, y and tokens as UsedData lays them
/// out).
void size_used_data(const TrainConfig& config, std::int64_t rows, UsedData& used);

/// The data source engines see, for a run that starts at step `first_step` with global sample
/// `first_sample`: micro-step m >= first_step * k, rank r uses samples from first_sample +
/// ((m - first_step * k) W + r) B, so a resumed run continues by global sample. With `used`
/// (sized by size_used_data) it also copies each batch there, rows counted from the start.
BatchFn batch_source(const TrainConfig& config, std::int64_t first_step,
                     std::int64_t first_sample, UsedData* used);

}  // namespace zl
