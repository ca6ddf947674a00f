// main.cpp — a program built against an installed zerolab: trains a small MLP with ZeRO-3 on two
// simulated ranks and with the unsharded reference, and exits 0 only if both end with the same
// bits, printing the library's version.
#include <cstdio>

#include "core/version.hpp"
#include "run/train.hpp"

int main() {
  zl::TrainConfig config;
  config.world = 2;
  config.steps = 3;
  config.micro_batch = 4;
  config.engine = zl::EngineKind::Zero3;
  const zl::TrainResult zero3 = zl::train(config);
  config.engine = zl::EngineKind::Reference;
  const zl::TrainResult reference = zl::train(config);
  const bool same = zero3.final_state.params == reference.final_state.params;
  std::printf("zerolab %s (%s): ZeRO-3 on 2 ranks, loss %.6f -> %.6f, %s the reference\n",
              zl::version().data(), zl::git_commit().data(), zero3.steps.front().loss,
              zero3.steps.back().loss, same ? "bitwise equal to" : "DIFFERENT FROM");
  return same ? 0 : 1;
}
