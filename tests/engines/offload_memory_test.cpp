// offload_memory_test.cpp — what offload_param does to the device and host peaks of the memory
// ledger: at ZeRO-3 the device peak drops by exactly the parameter shard bytes the host peak
// gains, and the results stay bitwise the same.
#include <gtest/gtest.h>

#include "run/compare.hpp"
#include "support/small_config.hpp"

namespace zl {
namespace {

// Why it is exact here: the parameter shards (params, booked for the whole run) move from the
// device to the host, and the only device memory offload adds is the staging buffer of one unit's
// shard, alive only inside that unit's gather. The device peak is reached in backward (the
// gathered unit, its full gradient, activations and the other units' shards), where no staging
// buffer is alive; each gather's moment is below it, since it holds one shard of staging where
// backward holds a full gradient buffer of the same dtype (W times larger). Nothing else is on
// the host (no offload_optimizer, no CPU checkpointing), so the host peak is the shards alone.
TEST(OffloadMemory, OffloadParamMovesTheShardBytesFromTheDevicePeakToTheHostPeak) {
  for (const int world : {1, 2, 3, 4}) {
    TrainConfig config = small_config();
    config.engine = EngineKind::Zero3;
    config.world = world;
    config.features.precision = DType::BF16;
    const TrainResult on_device = train(config);
    config.features.offload_param = true;
    const TrainResult offloaded = train(config);
    EXPECT_FALSE(first_difference(offloaded, on_device)) << "W=" << world;
    std::int64_t shard_bytes = 0;  // bf16 shards of every unit (none is persistent)
    for (const auto& unit : offloaded.layout) shard_bytes += 2 * unit.shard_elems;
    for (int r = 0; r < world; ++r) {
      const MemoryLedger& before = on_device.ranks[r].memory;
      const MemoryLedger& after = offloaded.ranks[r].memory;
      EXPECT_EQ(before.host_peak_bytes(), 0) << "W=" << world << " rank " << r;
      EXPECT_EQ(after.host_peak_bytes(), shard_bytes) << "W=" << world << " rank " << r;
      EXPECT_EQ(before.device_peak_bytes() - after.device_peak_bytes(), shard_bytes)
          << "W=" << world << " rank " << r;
      // The totals: what left the device is on the host, so the total peak stays.
      EXPECT_EQ(after.total_peak_bytes(), before.total_peak_bytes())
          << "W=" << world << " rank " << r;
    }
  }
}

}  // namespace
}  // namespace zl
