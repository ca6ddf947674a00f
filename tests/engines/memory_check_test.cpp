// memory_check_test.cpp — the refusal a run gets before it allocates when its ranks cannot fit:
// the same message for host memory and for a GPU's, with both figures and what to change.
#include "run/memory_check.hpp"

#include <gtest/gtest.h>

#include <string>

namespace zl {
namespace {

std::string refusal(const TrainConfig& config, std::int64_t planned, std::int64_t available,
                    std::string_view memory) {
  try {
    check_fits(config, planned, available, memory);
  } catch (const Error& e) {
    return e.what();
  }
  return {};
}

TEST(MemoryCheck, ARunThatFitsExactlyIsLetThrough) {
  const TrainConfig config;
  EXPECT_EQ(refusal(config, 1 << 30, 1 << 30, "host memory"), "");
}

TEST(MemoryCheck, TheRefusalNamesTheMemoryBothFiguresAndTheWayOut) {
  TrainConfig config;
  config.world = 8;
  config.engine = EngineKind::Zero3;
  config.accelerator = Accelerator::Cuda;
  EXPECT_EQ(refusal(config, std::int64_t{3} << 30, std::int64_t{1} << 30, "GPU 0's memory"),
            "this run needs at least 3.00 GiB of GPU 0's memory (8 ranks' model states and one "
            "micro-batch's activations, as zerolab estimate counts them) but 1.00 GiB are "
            "available: lower --world, the model or --micro-batch, or pass --no-memory-check");
}

// A sim run's W ranks live in this one process (and on a GPU share GPU 0): W ranks' bytes; an
// mpi or nccl process holds its own rank's.
TEST(MemoryCheck, SimRanksArePlannedTogether) {
  TrainConfig config;
  config.engine = EngineKind::Zero1;
  config.world = 4;
  config.accelerator = Accelerator::Cuda;
  const std::int64_t sim = planned_process_bytes(config);
  config.backend = Backend::Nccl;
  EXPECT_EQ(sim, 4 * planned_process_bytes(config));
}

}  // namespace
}  // namespace zl
