// memory_check_test.cpp — the refusal a run gets before it allocates when its ranks cannot fit:
// the same message for host memory and for a GPU's, with both figures and what to change; the
// final state rank 0 assembles counted, and assembled by rank 0 alone.
#include "run/memory_check.hpp"

#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "model/data.hpp"
#include "model/mlp.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "sim_world.hpp"

namespace zl {
namespace {

std::string refusal(const TrainConfig& config, std::int64_t planned, std::int64_t available,
                    std::string_view memory, bool final_state = false) {
  try {
    check_fits(config, planned, available, memory, final_state);
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

TEST(MemoryCheck, HostRefusalsCountTheFinalStatesCopy) {
  TrainConfig config;
  config.mlp = {.layers = 2, .width = 10, .in = 6, .classes = 4};  // units of 70 and 44 elements
  EXPECT_EQ(final_state_host_bytes(config), 3 * 4 * (128 + 64));   // each padded to 64s
  EXPECT_NE(refusal(config, 2, 1, "host memory", true).find("and the final state's host copy"),
            std::string::npos);
  EXPECT_EQ(refusal(config, 2, 1, "GPU 0's memory").find("final state"), std::string::npos);
}

// Only world rank 0 keeps the final state: W ranks in one process holding W copies of a large
// model was an out-of-memory kill after the last step. Every engine, and the hybrid ones.
TEST(MemoryCheck, OnlyRankZeroAssemblesTheFinalState) {
  TrainConfig config;
  config.world = 4;
  config.gpus_per_node = 2;
  config.mlp = {.layers = 2, .width = 10, .in = 6, .classes = 4};
  const ClassificationTask task{.features = 6, .classes = 4, .seed = 1};
  EngineOptions options;
  options.batch = [&](std::int64_t step, int rank) {
    return task.batch(first_sample_of(step, rank, 4, 2), 2);
  };
  // engine, shard group, hpZ partition
  const std::tuple<EngineKind, int, int> kinds[] = {
      {EngineKind::Ddp, 0, 0},   {EngineKind::Zero1, 0, 0}, {EngineKind::Zero2, 0, 0},
      {EngineKind::Zero3, 0, 0}, {EngineKind::Zero3, 2, 0}, {EngineKind::Zero3, 0, 2}};
  for (const auto& [engine, shard_group, hpz] : kinds) {
    EngineOptions own = options;
    own.features.shard_group_ranks = shard_group;
    own.features.hpz_partition_ranks = hpz;
    std::vector<std::size_t> units_kept(4);
    SimWorld world(4, SimOptions{.gpus_per_node = 2});
    world.run([&](Comm& comm) {
      CpuDevice device;
      Mlp model(device, config.mlp);
      auto ranked = make_engine(engine, model, device, comm, own);
      ranked->step(0);
      const ModelState state = ranked->full_state();
      std::size_t kept = 0;
      for (const auto& unit : state.exp_avg_sq) kept += unit.empty() ? 0 : 1;
      units_kept[static_cast<std::size_t>(comm.rank())] = kept;
    });
    EXPECT_EQ(units_kept, (std::vector<std::size_t>{2, 0, 0, 0}))
        << engine_name(engine) << " " << shard_group << " " << hpz;
  }
}

}  // namespace
}  // namespace zl
