// collective_memory_test.cpp — the simulator's CUDA memory space (sim/cuda) against the host's
// answer: W = 1..4 ranks' buffers on one GPU, every collective kind x dtype (x op for reductions),
// out of place and in NCCL's in-place forms, compared with comm/reduce.hpp's reduce_rank_order and
// plain copies of the same inputs. Reductions match bit for bit (a NaN matches any NaN), copies
// match every bit; the rest of each rank's buffer must be left as it was.
#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "comm/reduce.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "cuda_collective_memory.hpp"
#include "execute.hpp"
#include "gpu_test_support.hpp"

namespace zl {
namespace {

using test::download_bytes;
using test::first_difference;
using test::random_values;
using test::value_at;

// Where one rank's send and recv lie in its one device allocation, in elements.
struct Layout {
  std::size_t alloc_elems = 0;
  std::size_t send_offset = 0;
  std::size_t recv_offset = 0;
  std::size_t recv_elems = 0;
};

// Out of place: [send | recv]. In place: all_reduce and broadcast send = recv; reduce_scatter
// recv = send + r * count; all_gather send = recv + r * count.
Layout layout_of(CollectiveKind kind, std::size_t count, std::size_t world, std::size_t rank,
                 bool in_place) {
  const bool all_to_all = kind == CollectiveKind::AllToAll;
  const std::size_t send_elems =
      count * (kind == CollectiveKind::ReduceScatter || all_to_all ? world : 1);
  const std::size_t recv_elems =
      count * (kind == CollectiveKind::AllGather || all_to_all ? world : 1);
  if (!in_place) return {send_elems + recv_elems, 0, send_elems, recv_elems};
  switch (kind) {
    case CollectiveKind::ReduceScatter:
      return {send_elems, 0, rank * count, recv_elems};
    case CollectiveKind::AllGather:
      return {recv_elems, rank * count, 0, recv_elems};
    default:
      return {count, 0, 0, recv_elems};
  }
}

// What rank `rank`'s recv must hold, from every rank's initial memory: the host's answer.
std::vector<std::byte> expected_recv(const std::vector<std::vector<std::byte>>& memory,
                                     const std::vector<Layout>& layouts, const CallDesc& call,
                                     std::size_t rank) {
  const std::size_t world = memory.size();
  const std::size_t width = dtype_bytes(call.dtype);
  const std::size_t block_bytes = call.count * width;
  auto send_of = [&](std::size_t r) { return memory[r].data() + layouts[r].send_offset * width; };
  std::vector<std::byte> out(layouts[rank].recv_elems * width);
  std::vector<const void*> inputs(world);
  switch (call.kind) {
    case CollectiveKind::AllReduce:
      for (std::size_t r = 0; r < world; ++r) inputs[r] = send_of(r);
      reduce_rank_order(inputs, out.data(), call.count, call.dtype, call.op);
      break;
    case CollectiveKind::ReduceScatter:
      for (std::size_t r = 0; r < world; ++r) inputs[r] = send_of(r) + rank * block_bytes;
      reduce_rank_order(inputs, out.data(), call.count, call.dtype, call.op);
      break;
    case CollectiveKind::AllGather:
      for (std::size_t r = 0; r < world; ++r) {
        std::memcpy(out.data() + r * block_bytes, send_of(r), block_bytes);
      }
      break;
    case CollectiveKind::Broadcast:
      std::memcpy(out.data(), send_of(static_cast<std::size_t>(call.root)), block_bytes);
      break;
    case CollectiveKind::AllToAll:  // block r of rank `rank`'s recv is block `rank` of r's send
      for (std::size_t r = 0; r < world; ++r) {
        std::memcpy(out.data() + r * block_bytes, send_of(r) + rank * block_bytes, block_bytes);
      }
      break;
    case CollectiveKind::Barrier:
      break;
  }
  return out;
}

// Runs one collective over `world` ranks' device buffers through `space` and checks every rank's
// whole allocation against the host's answer.
void check_collective(CollectiveMemory& space, CudaDevice& device, CallDesc call, std::size_t world,
                      bool in_place) {
  const std::size_t width = dtype_bytes(call.dtype);
  const std::string what =
      describe(call) + " W=" + std::to_string(world) + (in_place ? " in place" : " out of place");
  std::vector<Layout> layouts;
  std::vector<std::vector<std::byte>> memory;
  std::vector<Buffer> staged, buffers;
  std::vector<CallDesc> calls;
  for (std::size_t r = 0; r < world; ++r) {
    layouts.push_back(layout_of(call.kind, call.count, world, r, in_place));
    const bool with_nan = call.op == ReduceOp::Max && r == 1;
    memory.push_back(random_values(call.dtype, layouts[r].alloc_elems,
                                   static_cast<std::uint32_t>(100 * world + r), with_nan));
    // Uploaded, then copied on the device's stream and not waited for: the space must wait.
    const auto elems = static_cast<std::int64_t>(layouts[r].alloc_elems);
    staged.push_back(device.alloc(MemCategory::CommBuffer, call.dtype, {elems}));
    buffers.push_back(device.alloc(MemCategory::CommBuffer, call.dtype, {elems}));
    device.copy_from_host(staged[r].data(), memory[r].data(), memory[r].size());
    device.copy(buffers[r].data(), staged[r].data(), memory[r].size());
    auto* base = static_cast<std::byte*>(buffers[r].data());
    call.send = base + layouts[r].send_offset * width;
    call.recv = base + layouts[r].recv_offset * width;
    calls.push_back(call);
  }
  space.execute(calls);
  for (std::size_t r = 0; r < world; ++r) {
    std::vector<std::byte> expected = memory[r];
    const auto recv = expected_recv(memory, layouts, call, r);
    std::memcpy(expected.data() + layouts[r].recv_offset * width, recv.data(), recv.size());
    const auto actual = download_bytes(device, buffers[r]);
    const std::int64_t i = first_difference(actual, expected, call.dtype, is_reduction(call.kind));
    if (i >= 0) {
      const auto index = static_cast<std::size_t>(i);
      ADD_FAILURE() << what << ": rank " << r << " element " << i << " of its buffer: gpu "
                    << value_at(actual, call.dtype, index) << ", host "
                    << value_at(expected, call.dtype, index);
      return;
    }
  }
}

class GpuCollectiveMemory : public ::testing::Test {
 protected:
  void SetUp() override {
    ZL_REQUIRE_GPU();
    device_ = std::make_unique<CudaDevice>(0);
  }
  std::unique_ptr<CudaDevice> device_;
  CudaCollectiveMemory space_;
};

constexpr std::size_t kCount = 517;  // per-rank elements: odd, several blocks of threads

TEST_F(GpuCollectiveMemory, ReductionsGiveTheHostBits) {
  for (const CollectiveKind kind : {CollectiveKind::AllReduce, CollectiveKind::ReduceScatter}) {
    for (const DType dtype : {DType::F32, DType::F64, DType::BF16, DType::F16}) {
      for (const ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
        for (std::size_t world = 1; world <= 4; ++world) {
          for (const bool in_place : {false, true}) {
            check_collective(space_, *device_,
                             {.kind = kind, .op = op, .dtype = dtype, .count = kCount}, world,
                             in_place);
          }
        }
      }
    }
  }
}

TEST_F(GpuCollectiveMemory, AllToAllDeliversEveryBlock) {
  for (const DType dtype : {DType::F32, DType::I8}) {
    for (std::size_t world = 1; world <= 4; ++world) {
      check_collective(space_, *device_,
                       {.kind = CollectiveKind::AllToAll, .dtype = dtype, .count = kCount}, world,
                       /*in_place=*/false);
    }
  }
}

TEST_F(GpuCollectiveMemory, GatherAndBroadcastCopyEveryBit) {
  for (const DType dtype : {DType::F32, DType::F64, DType::BF16, DType::F16, DType::I64}) {
    for (std::size_t world = 1; world <= 4; ++world) {
      for (const bool in_place : {false, true}) {
        check_collective(space_, *device_,
                         {.kind = CollectiveKind::AllGather, .dtype = dtype, .count = kCount},
                         world, in_place);
        for (const int root : {0, static_cast<int>(world) - 1}) {
          check_collective(
              space_, *device_,
              {.kind = CollectiveKind::Broadcast, .dtype = dtype, .count = kCount, .root = root},
              world, in_place);
        }
      }
    }
  }
}

TEST_F(GpuCollectiveMemory, EmptyCallsMoveNothingAndInt64ReductionsAreRefused) {
  Buffer a = device_->alloc(MemCategory::CommBuffer, DType::I64, {4});
  Buffer b = device_->alloc(MemCategory::CommBuffer, DType::I64, {4});
  std::vector<CallDesc> calls(2, {.kind = CollectiveKind::AllGather, .dtype = DType::F32});
  calls[0].send = calls[0].recv = a.data();
  calls[1].send = calls[1].recv = b.data();
  space_.execute(calls);
  for (CallDesc& call : calls) {
    call.kind = CollectiveKind::AllReduce;
    call.dtype = DType::I64;
    call.count = 4;
  }
  EXPECT_THROW(space_.execute(calls), Error);
}

TEST_F(GpuCollectiveMemory, HoldsDeviceMemoryOnly) {
  Buffer on_gpu = device_->alloc(MemCategory::CommBuffer, DType::F32, {16});
  EXPECT_TRUE(space_.holds(on_gpu.data()));
  void* pinned = nullptr;
  ZL_CUDA_CHECK(cudaMallocHost(&pinned, 64));
  EXPECT_FALSE(space_.holds(pinned)) << "pinned host memory is the host's";
  ZL_CUDA_CHECK(cudaFreeHost(pinned));
  std::vector<float> host(16);
  EXPECT_FALSE(space_.holds(host.data()));
}

TEST_F(GpuCollectiveMemory, TheRegisteredSpaceTakesDeviceBuffersFromTheSimulator) {
  CollectiveMemory& registered = cuda_collective_memory();
  EXPECT_EQ(&registered, &cuda_collective_memory()) << "one instance per process";
  constexpr std::size_t kElems = 33;
  const auto x = test::random_floats(kElems, 80), y = test::random_floats(kElems, 81);
  Buffer gx = test::upload(*device_, x), gy = test::upload(*device_, y);
  std::vector<CallDesc> calls(2, {.kind = CollectiveKind::AllReduce, .count = kElems});
  calls[0].send = calls[0].recv = gx.data();
  calls[1].send = calls[1].recv = gy.data();
  execute_collective(calls);  // sim/execute.cpp hands the device buffers to the space
  std::vector<float> sum(kElems);
  const std::vector<const void*> inputs = {x.data(), y.data()};
  reduce_rank_order(inputs, sum.data(), kElems, DType::F32, ReduceOp::Sum);
  test::expect_same_bits(test::download(*device_, gx), sum, "rank 0");
  test::expect_same_bits(test::download(*device_, gy), sum, "rank 1");
  // Host buffers still take the host path.
  std::vector<float> hx = x, hy = y;
  calls[0].send = calls[0].recv = hx.data();
  calls[1].send = calls[1].recv = hy.data();
  execute_collective(calls);
  test::expect_same_bits(hx, sum, "host rank 0");
}

TEST(CollectiveMemory, HostPointersAreNotHeldEvenWithoutAGpu) {
  // No GPU needed: a failed query means host memory, never an error.
  CudaCollectiveMemory space;
  int on_stack = 0;
  std::vector<double> on_heap(8);
  EXPECT_FALSE(space.holds(&on_stack));
  EXPECT_FALSE(space.holds(on_heap.data()));
  EXPECT_FALSE(space.holds(nullptr));
  if (CudaDevice::device_count() > 0) {  // without a driver every CUDA call reports that again
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "holds() leaves no CUDA error behind";
  }
}

}  // namespace
}  // namespace zl
