// offload_memory_test.cpp — what offload_param does to the device and host peaks of the memory
// ledger: at ZeRO-3 the device peak drops by exactly the parameter shard bytes the host peak
// gains, less the one shard staged for a gather, and the results stay bitwise the same; and what
// the NVMe tier keeps on disk, for the optimizer and for the parameters.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>

#include "run/compare.hpp"
#include "support/small_config.hpp"

namespace zl {
namespace {

// Why it is exact here: the parameter shards (params, booked for the whole run) move from the
// device to the host, and the only device memory offload adds is the staging buffer of one unit's
// shard, alive only inside that unit's gather. The device peak is reached in backward, at the
// largest unit: its full fp32 gradient buffer is booked before its parameters are gathered, and
// the visit computes with the gathered bf16 unit as it is. With offload that unit's gather also
// holds its staged shard, so the peak drops by every shard but that one. Nothing else is on the
// host (no offload_optimizer, no CPU checkpointing), so the host peak is the shards alone.
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
    std::int64_t staged_bytes = 0;  // the largest unit's bf16 shard, staged for its gather
    for (const auto& unit : offloaded.layout) {
      shard_bytes += 2 * unit.shard_elems;
      staged_bytes = std::max(staged_bytes, 2 * unit.shard_elems);
    }
    for (int r = 0; r < world; ++r) {
      const MemoryLedger& before = on_device.ranks[r].memory;
      const MemoryLedger& after = offloaded.ranks[r].memory;
      EXPECT_EQ(before.host_peak_bytes(), 0) << "W=" << world << " rank " << r;
      EXPECT_EQ(after.host_peak_bytes(), shard_bytes) << "W=" << world << " rank " << r;
      EXPECT_EQ(before.device_peak_bytes() - after.device_peak_bytes(), shard_bytes - staged_bytes)
          << "W=" << world << " rank " << r;
      // The totals: what left the device is on the host, and the staged copy is on both.
      EXPECT_EQ(after.total_peak_bytes(), before.total_peak_bytes() + staged_bytes)
          << "W=" << world << " rank " << r;
    }
  }
}

// ZeRO-Infinity's NVMe tier: the same bits as the optimizer in host memory; between steps the
// master and moments are only on disk (nvme_master 4 and nvme_optimizer 8 bytes per owned
// element), and during a step only one unit of them is in host memory at a time.
TEST(OffloadMemory, NvmeKeepsTheOptimizerOnDiskAndOneUnitInHostMemory) {
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / ("zl_nvme_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  for (const EngineKind engine :
       {EngineKind::Ddp, EngineKind::Zero1, EngineKind::Zero2, EngineKind::Zero3}) {
    for (const DType precision : {DType::F32, DType::BF16}) {
      TrainConfig config = small_config();
      config.engine = engine;
      config.world = 3;
      config.features.precision = precision;
      config.features.offload_optimizer = true;
      const TrainResult in_host_memory = train(config);
      config.features.nvme_path = folder.string();
      const TrainResult on_disk = train(config);
      const std::string what = fmt::format("{} {}", engine_name(engine), dtype_name(precision));
      EXPECT_FALSE(first_difference(on_disk, in_host_memory)) << what;
      std::int64_t owned_elems = 0, largest_elems = 0;
      for (const auto& unit : on_disk.layout) {
        const std::int64_t elems = engine == EngineKind::Ddp ? unit.padded_elems : unit.shard_elems;
        owned_elems += elems;
        largest_elems = std::max(largest_elems, elems);
      }
      const MemoryLedger& after_steps = on_disk.steps.back().memory;  // rank 0, before the end
      EXPECT_EQ(after_steps.current_bytes(MemCategory::NvmeMaster), 4 * owned_elems) << what;
      EXPECT_EQ(after_steps.current_bytes(MemCategory::NvmeOptimizer), 8 * owned_elems) << what;
      EXPECT_EQ(after_steps.current_bytes(MemCategory::HostMaster), 0) << what;
      EXPECT_EQ(after_steps.current_bytes(MemCategory::HostOptimizer), 0) << what;
      EXPECT_EQ(after_steps.peak_bytes(MemCategory::HostMaster), 4 * largest_elems) << what;
      EXPECT_EQ(after_steps.peak_bytes(MemCategory::HostOptimizer), 8 * largest_elems) << what;
      // disk is neither device nor host memory
      EXPECT_EQ(after_steps.total_current_bytes(),
                after_steps.device_current_bytes() + after_steps.host_current_bytes())
          << what;
      EXPECT_TRUE(std::filesystem::is_empty(folder)) << what << ": the swap files stay";
    }
  }
  std::filesystem::remove_all(folder);
}

// Elements of a rank's own shards, every unit's.
std::int64_t owned_shard_elems(const TrainResult& result) {
  std::int64_t elems = 0;
  for (const auto& unit : result.layout) elems += unit.shard_elems;
  return elems;
}

// ZeRO-Infinity with both offloads on NVMe (DeepSpeed's Infinity configs): the same bits as both
// in host memory; the parameter shards are on disk (nvme_params, 2 bytes per owned bf16 element)
// but for those max_in_cpu keeps in host memory, and host memory holds those and a pool of
// offload_param.buffer_count swap buffers of the largest shard on disk, no more, at any time.
TEST(OffloadMemory, NvmeKeepsTheShardsPastMaxInCpuOnDiskThroughAPoolOfSwapBuffers) {
  const std::filesystem::path folder =
      std::filesystem::temp_directory_path() / ("zl_nvme_param_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  for (const int world : {1, 3}) {
    TrainConfig config = small_config();
    config.engine = EngineKind::Zero3;
    config.world = world;
    config.features.precision = DType::BF16;
    config.features.offload_optimizer = true;
    config.features.offload_param = true;
    const TrainResult in_host_memory = train(config);
    EXPECT_EQ(in_host_memory.steps.back().memory.current_bytes(MemCategory::HostParams),
              2 * owned_shard_elems(in_host_memory))
        << world;
    config.features.nvme_path = folder.string();
    config.features.param_nvme_path = folder.string();
    const std::vector<UnitLayout>& layout = in_host_memory.layout;
    ASSERT_GE(layout.size(), 3u);
    for (const int buffers : {1, 5}) {
      // 0: every shard on disk; the first unit's: that one in host memory
      for (const std::int64_t max_in_cpu : {std::int64_t{0}, layout[0].shard_elems}) {
        config.features.param_buffer_count = buffers;
        config.features.param_max_in_cpu_elems = max_in_cpu;
        const TrainResult on_disk = train(config);
        const std::string what =
            fmt::format("W={} buffers {} max_in_cpu {}", world, buffers, max_in_cpu);
        EXPECT_FALSE(first_difference(on_disk, in_host_memory)) << what;
        std::int64_t disk_elems = 0, largest_elems = 0;
        for (std::size_t u = max_in_cpu > 0 ? 1 : 0; u < layout.size(); ++u) {
          disk_elems += layout[u].shard_elems;
          largest_elems = std::max(largest_elems, layout[u].shard_elems);
        }
        const MemoryLedger& after_steps = on_disk.steps.back().memory;  // rank 0, before the end
        EXPECT_EQ(after_steps.current_bytes(MemCategory::NvmeParams), 2 * disk_elems) << what;
        const std::int64_t host_bytes = 2 * (max_in_cpu + buffers * largest_elems);
        EXPECT_EQ(after_steps.current_bytes(MemCategory::HostParams), host_bytes) << what;
        EXPECT_EQ(after_steps.peak_bytes(MemCategory::HostParams), host_bytes) << what;
        EXPECT_TRUE(std::filesystem::is_empty(folder)) << what << ": the swap files stay";
      }
    }
  }
  std::filesystem::remove_all(folder);
}

}  // namespace
}  // namespace zl
