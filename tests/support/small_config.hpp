// small_config.hpp — the small training run many tests use: 3 ranks, 3 steps, a 3-layer MLP.
#pragma once

#include "run/train.hpp"

namespace zl {

/// 3 ranks, 3 steps of 4 rows, MLP 5 -> 10 -> 10 -> 4, lr 0.05, seed 17 (engine: DDP).
inline TrainConfig small_config() {
  TrainConfig config;
  config.world = 3;
  config.steps = 3;
  config.micro_batch = 4;
  config.mlp = {.layers = 3, .width = 10, .in = 5, .classes = 4};
  config.adamw.lr = 0.05;
  config.seed = 17;
  return config;
}

}  // namespace zl
