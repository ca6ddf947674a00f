// memory_ledger_test.cpp — the CUDA Device's memory ledger against the driver: every cudaMalloc a
// buffer makes is booked under its category, and cudaMemGetInfo's count of used bytes covers the
// ledger (plus the device's own scratch) to within a page per allocation and the runtime's slack.
// Freed blocks are reused in stream order. The consistency rule itself is tested without a GPU.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/error.hpp"
#include "gpu_test_support.hpp"
#include "ops/cuda/cuda_device.hpp"
#include "run/train.hpp"

namespace zl {
namespace {

constexpr std::int64_t kMiB = std::int64_t{1} << 20;

TEST(GpuMemoryCheck, ConsistentOnlyWithinPagesAndSlack) {
  DeviceMemoryCheck check{.ledger_bytes = 100 * kMiB,
                          .internal_bytes = 32 * kMiB,
                          .allocations = 4,
                          .driver_used_bytes = 132 * kMiB};
  EXPECT_TRUE(check.consistent());
  // Small buffers may land in pages the driver had already taken: up to a page each is missing.
  check.driver_used_bytes = 132 * kMiB - 4 * DeviceMemoryCheck::kPageBytes;
  EXPECT_TRUE(check.consistent());
  check.driver_used_bytes -= 1;  // more missing than that: the ledger books memory never taken
  EXPECT_FALSE(check.consistent());
  check.driver_used_bytes =
      132 * kMiB + 4 * DeviceMemoryCheck::kPageBytes + DeviceMemoryCheck::kRuntimeSlackBytes;
  EXPECT_TRUE(check.consistent());
  check.driver_used_bytes += 1;  // more than pages and slack explain: an allocation not booked
  EXPECT_FALSE(check.consistent());
}

TEST(GpuMemoryLedger, BooksEveryCategoryAndAgreesWithTheDriver) {
  ZL_REQUIRE_GPU();
  CudaDevice device(0);
  device.check_memory_ledger();
  const std::int64_t before = device.memory_check().driver_used_bytes;
  {
    // Sizes well above the slack, so a buffer that was not really allocated would show.
    std::vector<Buffer> buffers;
    buffers.push_back(device.alloc(MemCategory::Params, DType::BF16, {256 * kMiB / 2}));
    buffers.push_back(device.alloc(MemCategory::Grads, DType::F32, {512 * kMiB / 4}));
    buffers.push_back(device.alloc(MemCategory::Optimizer, DType::F32, {2, 256 * kMiB / 4}));
    buffers.push_back(device.alloc(MemCategory::Activations, DType::F32, {12345}));
    EXPECT_EQ(device.ledger().current_bytes(MemCategory::Params), 256 * kMiB);
    EXPECT_EQ(device.ledger().current_bytes(MemCategory::Grads), 512 * kMiB);
    EXPECT_EQ(device.ledger().current_bytes(MemCategory::Optimizer), 512 * kMiB);
    EXPECT_EQ(device.ledger().current_bytes(MemCategory::Activations), 12345 * 4);
    const DeviceMemoryCheck check = device.memory_check();
    EXPECT_TRUE(check.consistent())
        << "ledger " << check.ledger_bytes << ", scratch " << check.internal_bytes << ", driver "
        << check.driver_used_bytes << " in " << check.allocations << " allocations";
    EXPECT_GE(check.driver_used_bytes - before, 1280 * kMiB);
    // Buffers come zeroed, as on the CPU.
    const auto activations = test::download(device, buffers[3]);
    for (const float value : activations) ASSERT_EQ(value, 0.0f);
    const std::vector<float> ones(12345, 1.0f);
    device.copy_from_host(buffers[3].data(), ones.data(), ones.size() * sizeof(float));
  }
  EXPECT_EQ(device.ledger().total_current_bytes(), 0);
  EXPECT_EQ(device.ledger().peak_bytes(MemCategory::Grads), 512 * kMiB);
  // The freed blocks stay cached, counted as the device's own, and the check still holds.
  EXPECT_EQ(device.cached_bytes(), 1280 * kMiB + 12345 * 4);
  device.check_memory_ledger();
  {
    // The same size again is the cached block, zeroed again.
    const Buffer again = device.alloc(MemCategory::Activations, DType::F32, {12345});
    EXPECT_EQ(device.cached_bytes(), 1280 * kMiB);
    for (const float value : test::download(device, again)) ASSERT_EQ(value, 0.0f);
  }
  device.release_cache();
  EXPECT_EQ(device.cached_bytes(), 0);
  device.check_memory_ledger();
  EXPECT_LT(device.memory_check().driver_used_bytes, before + 1280 * kMiB);
}

// A block freed while a side stream still writes it is reused only after that write: 256 MiB
// set to 0xAB on the side stream, freed at once (no wait), taken again at the same size, and
// zeroed on the compute stream, which must wait for the side stream's event first.
TEST(GpuMemoryLedger, FreedBlocksAreReusedInStreamOrder) {
  ZL_REQUIRE_GPU();
  CudaDevice device(0);
  cudaStream_t side = nullptr;
  ASSERT_EQ(cudaStreamCreate(&side), cudaSuccess);
  device.add_side_stream(side);
  constexpr std::int64_t kElems = 256 * kMiB / 4;
  void* first = nullptr;
  {
    Buffer buffer = device.alloc(MemCategory::Activations, DType::F32, {kElems});
    first = buffer.data();
    device.synchronize();  // the allocation's own memset is done before the side stream writes
    ASSERT_EQ(cudaMemsetAsync(buffer.data(), 0xAB, static_cast<std::size_t>(buffer.bytes()), side),
              cudaSuccess);
  }
  const Buffer again = device.alloc(MemCategory::Activations, DType::F32, {kElems});
  EXPECT_EQ(again.data(), first);
  const auto values = test::download(device, again);
  EXPECT_EQ(std::count(values.begin(), values.end(), 0.0f), kElems);
  device.remove_side_stream(side);
  cudaStreamSynchronize(side);
  cudaStreamDestroy(side);
}

TEST(GpuMemoryLedger, MissingDeviceIsAOneLineError) {
  ZL_REQUIRE_GPU();
  try {
    CudaDevice device(CudaDevice::device_count());
    ADD_FAILURE() << "a device index past the last GPU was accepted";
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("does not exist"), std::string::npos) << error.what();
  }
}

// A run whose ranks cannot fit in the GPU's free memory is refused before anything is allocated,
// naming the GPU: 64 sim ranks of GPT-2 350M on GPU 0 would need hundreds of GiB.
TEST(GpuMemoryCheck, ARunLargerThanTheGpuIsRefusedBeforeAllocating) {
  ZL_REQUIRE_GPU();
  TrainConfig config;
  config.model = ModelKind::Gpt;
  config.gpt = gpt_preset("350M");
  config.world = 64;
  config.engine = EngineKind::Ddp;
  config.accelerator = Accelerator::Cuda;
  try {
    train(config);
    FAIL() << "trained";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("GiB of GPU 0's memory (64 ranks'"), std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace zl
