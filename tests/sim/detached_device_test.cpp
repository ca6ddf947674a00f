// detached_device_test.cpp — the detached CPU device (ops/cpu/detached_cpu_device.hpp), the
// stand-in for a GPU: the host crashes when it touches its buffers, its calls give a plain
// CpuDevice's bits, host memory handed to it is an error, its arena reuses freed pages as zeros,
// and the simulator's collectives on its buffers (sim/detached_collective_memory.hpp) give the
// bits of the same collectives on host buffers.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "core/dtype.hpp"
#include "core/error.hpp"
#include "detached_collective_memory.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "ops/cpu/detached_cpu_device.hpp"
#include "optim/adamw.hpp"
#include "optim/grad_norm.hpp"
#include "sim_world.hpp"

namespace zl {
namespace {

using Bytes = std::vector<std::byte>;

// Values of mixed magnitude and sign, so a different order or rounding would change the bits.
std::vector<float> mixed_values(std::size_t seed, std::size_t elems) {
  std::vector<float> values(elems);
  for (std::size_t i = 0; i < elems; ++i) {
    const auto x = static_cast<float>((i * 7919 + seed * 104729) % 10007);
    values[i] = (i + seed) % 5 == 0 ? x * 1e3f : x * 1e-4f - 0.5f;
  }
  return values;
}

// A device buffer of `elems` elements of `dtype` holding `host`'s bytes.
template <class T>
Buffer upload(Device& device, DType dtype, const std::vector<T>& host) {
  Buffer buffer =
      device.alloc(MemCategory::Params, dtype,
                   {static_cast<std::int64_t>(host.size() * sizeof(T) / dtype_bytes(dtype))});
  device.copy_from_host(buffer.data(), host.data(), host.size() * sizeof(T));
  return buffer;
}

Bytes download(Device& device, const Buffer& buffer) {
  Bytes host(static_cast<std::size_t>(buffer.bytes()));
  device.copy_to_host(host.data(), buffer.data(), host.size());
  return host;
}

// Checks two devices' outputs bit for bit, naming the output and the first differing byte.
void expect_same_bits(const std::vector<Bytes>& cpu, const std::vector<Bytes>& detached,
                      const std::vector<std::string>& names) {
  ASSERT_EQ(cpu.size(), detached.size());
  for (std::size_t k = 0; k < cpu.size(); ++k) {
    ASSERT_EQ(cpu[k].size(), detached[k].size()) << names[k];
    for (std::size_t i = 0; i < cpu[k].size(); ++i) {
      ASSERT_EQ(cpu[k][i], detached[k][i]) << names[k] << ": first differing byte " << i;
    }
  }
}

// Downloads every buffer in `outputs` (after the calls wrote them).
std::vector<Bytes> download_all(Device& device, const std::vector<const Buffer*>& outputs) {
  std::vector<Bytes> bytes;
  for (const Buffer* buffer : outputs) bytes.push_back(download(device, *buffer));
  return bytes;
}

// ---- the host cannot touch a detached buffer ------------------------------------------------

TEST(DetachedDeviceDeathTest, HostReadOrWriteOfABufferCrashes) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  DetachedCpuDevice device;
  Buffer buffer = device.alloc(MemCategory::Params, DType::F32, {16});
  const std::span<float> elems = buffer.as<float>();
  EXPECT_DEATH(
      {
        const volatile float value = elems[3];
        static_cast<void>(value);
      },
      "");
  EXPECT_DEATH(static_cast<void>(*static_cast<volatile float*>(buffer.data()) = 1.0f), "");
}

// ---- the same bits as a CpuDevice -------------------------------------------------------------

// The step work, run on `device`: every output downloaded, in `names` order.
std::vector<Bytes> step_ops(Device& device) {
  constexpr std::size_t kElems = 640;  // ten norm blocks
  const std::vector<float> a = mixed_values(1, kElems);
  const std::vector<float> b = mixed_values(2, kElems);
  Buffer x = upload(device, DType::F32, a);
  Buffer y = upload(device, DType::F32, b);
  const auto elems = static_cast<std::int64_t>(kElems);

  Buffer bf16 = device.alloc(MemCategory::Params, DType::BF16, {elems});
  Buffer f16 = device.alloc(MemCategory::Params, DType::F16, {elems});
  Buffer bf16_wide = device.alloc(MemCategory::Params, DType::F32, {elems});
  Buffer f16_wide = device.alloc(MemCategory::Params, DType::F32, {elems});
  Buffer f32_copy = device.alloc(MemCategory::Params, DType::F32, {elems});
  device.convert(x.data(), DType::F32, bf16.data(), DType::BF16, elems);
  device.convert(x.data(), DType::F32, f16.data(), DType::F16, elems);
  device.convert(bf16.data(), DType::BF16, bf16_wide.data(), DType::F32, elems);
  device.convert(f16.data(), DType::F16, f16_wide.data(), DType::F32, elems);
  device.convert(x.data(), DType::F32, f32_copy.data(), DType::F32, elems);

  Buffer sum = upload(device, DType::F32, a);
  device.add(sum.data(), y.data(), DType::F32, elems);
  Buffer bf16_sum = device.alloc(MemCategory::Params, DType::BF16, {elems});
  device.convert(y.data(), DType::F32, bf16_sum.data(), DType::BF16, elems);
  device.add(bf16_sum.data(), bf16.data(), DType::BF16, elems);
  Buffer f16_sum = device.alloc(MemCategory::Params, DType::F16, {elems});
  device.copy(f16_sum.data(), f16.data(), static_cast<std::size_t>(f16.bytes()));
  device.add(f16_sum.data(), f16.data(), DType::F16, elems);

  Buffer scaled = upload(device, DType::F32, a);
  device.scale(scaled.as<float>(), 0.37f);
  Buffer divided = upload(device, DType::F32, a);
  device.divide(divided.as<float>(), 3.0f);
  Buffer zeroed = upload(device, DType::F32, a);
  device.fill_zero(zeroed.data(), 100 * sizeof(float));

  Buffer partial_bytes =
      device.alloc(MemCategory::CommBuffer, DType::F64, {elems / std::int64_t{kNormBlockElems}});
  device.block_sumsq(y.as<float>(), partial_bytes.as<double>());
  // the ten partials as leaves 3 to 13 of a unit's tree: nodes [3, 4), [4, 8), [8, 12), [12, 13)
  Buffer tree_sums = device.alloc(MemCategory::CommBuffer, DType::F64, {4});
  device.tree_cover_sums(partial_bytes.as<double>(), 3, tree_sums.as<double>());

  Buffer params = upload(device, DType::F32, a);
  Buffer exp_avg = upload(device, DType::F32, mixed_values(3, kElems));
  Buffer exp_avg_sq = device.alloc(MemCategory::Optimizer, DType::F32, {elems});
  device.scale(exp_avg.as<float>(), 1e-3f);
  for (std::int64_t step = 1; step <= 3; ++step) {
    device.adamw_update(params.as<float>(), y.as<float>(), exp_avg.as<float>(),
                        exp_avg_sq.as<float>(), adamw_scalars(AdamWConfig{}, step));
  }
  device.synchronize();
  return download_all(
      device, {&bf16, &f16, &bf16_wide, &f16_wide, &f32_copy, &sum, &bf16_sum, &f16_sum, &scaled,
               &divided, &zeroed, &partial_bytes, &tree_sums, &params, &exp_avg, &exp_avg_sq});
}

// A buffer made with unset contents is NaN in every training dtype (-1 in int64) on both CPU
// devices, so a kernel that reads it before writing it shows; a zeroed one, after an unset one
// of the same size is freed, is zeros again.
TEST(DetachedDevice, UnsetBuffersAreNanAndZeroedOnesZero) {
  CpuDevice cpu;
  DetachedCpuDevice detached;
  for (Device* device : std::initializer_list<Device*>{&cpu, &detached}) {
    auto bytes_of = [&](const Buffer& buffer) {
      std::vector<unsigned char> bytes(static_cast<std::size_t>(buffer.bytes()));
      device->copy_to_host(bytes.data(), buffer.data(), bytes.size());
      return bytes;
    };
    {
      Buffer unset = device->alloc_unset(MemCategory::Grads, DType::F32, {1000});
      const auto bytes = bytes_of(unset);
      EXPECT_TRUE(
          std::all_of(bytes.begin(), bytes.end(), [](unsigned char b) { return b == 0xFF; }));
      float first = 0.0f;
      std::memcpy(&first, bytes.data(), sizeof(first));
      EXPECT_TRUE(std::isnan(first));
      Buffer unset_activation =
          device->alloc_activation_unset(ActivationKind::Block, DType::BF16, {10, 3});
      EXPECT_EQ(device->ledger().activation_bytes(ActivationKind::Block), 60);
    }
    Buffer zeroed = device->alloc(MemCategory::Grads, DType::F32, {1000});
    const auto bytes = bytes_of(zeroed);
    EXPECT_TRUE(std::all_of(bytes.begin(), bytes.end(), [](unsigned char b) { return b == 0; }));
  }
}

TEST(DetachedDevice, StepOpsGiveCpuDeviceBits) {
  CpuDevice cpu;
  DetachedCpuDevice detached;
  expect_same_bits(
      step_ops(cpu), step_ops(detached),
      {"convert f32->bf16", "convert f32->f16", "convert bf16->f32", "convert f16->f32",
       "convert f32->f32", "add f32", "add bf16", "add f16", "scale", "divide", "fill_zero",
       "block_sumsq", "tree_cover_sums", "adamw params", "adamw exp_avg", "adamw exp_avg_sq"});
}

// A few kernels, labels and tokens on the device too: every output downloaded.
std::vector<Bytes> kernels(Device& device) {
  constexpr std::int64_t kRows = 6, kIn = 8, kOut = 5;
  Buffer x = upload(device, DType::F32, mixed_values(4, kRows * kIn));
  Buffer w = upload(device, DType::F32, mixed_values(5, kOut * kIn));
  Buffer b = upload(device, DType::F32, mixed_values(6, kOut));
  Buffer y = device.alloc(MemCategory::Activations, DType::F32, {kRows, kOut});
  device.linear_forward(x.as<float>(), w.as<float>(), b.as<float>(), y.as<float>(), kRows, kIn,
                        kOut);

  Buffer labels = upload(device, DType::I64, std::vector<std::int64_t>{0, 4, 2, 2, 1, 3});
  Buffer dy = device.alloc(MemCategory::Activations, DType::F32, {kRows, kOut});
  const float loss = device.cross_entropy_forward_backward(y.as<float>(), labels.as<std::int64_t>(),
                                                           dy.as<float>(), kRows, kOut, kOut);
  Buffer loss_bytes = upload(device, DType::F32, std::vector<float>{loss});

  Buffer dw = device.alloc(MemCategory::Grads, DType::F32, {kOut, kIn});
  Buffer db = device.alloc(MemCategory::Grads, DType::F32, {kOut});
  Buffer dx = device.alloc(MemCategory::Activations, DType::F32, {kRows, kIn});
  device.linear_backward(x.as<float>(), w.as<float>(), dy.as<float>(), dw.as<float>(),
                         db.as<float>(), dx.as<float>(), kRows, kIn, kOut);

  constexpr std::int64_t kBatch = 2, kSeq = 3, kChannels = 8, kVocab = 7, kHeads = 2;
  Buffer tokens = upload(device, DType::I64, std::vector<std::int64_t>{6, 0, 3, 3, 5, 1});
  Buffer wte = upload(device, DType::F32, mixed_values(7, kVocab * kChannels));
  Buffer wpe = upload(device, DType::F32, mixed_values(8, kSeq * kChannels));
  Buffer embedded = device.alloc(MemCategory::Activations, DType::F32, {kBatch, kSeq, kChannels});
  device.embedding_forward(tokens.as<std::int64_t>(), wte.as<float>(), wpe.as<float>(),
                           embedded.as<float>(), kBatch, kSeq, kChannels, kVocab);

  Buffer qkv = upload(device, DType::F32, mixed_values(9, kBatch * kSeq * 3 * kChannels));
  device.scale(qkv.as<float>(), 1e-3f);
  Buffer stats = device.alloc(MemCategory::Activations, DType::F32,
                              {kBatch, kHeads, kSeq, kAttentionStatsPerRow});
  Buffer attended = device.alloc(MemCategory::Activations, DType::F32, {kBatch, kSeq, kChannels});
  device.attention_forward(qkv.as<float>(), stats.as<float>(), attended.as<float>(), kBatch, kSeq,
                           kChannels, kHeads);
  return download_all(device, {&y, &loss_bytes, &dy, &dw, &db, &dx, &embedded, &stats, &attended});
}

TEST(DetachedDevice, KernelsGiveCpuDeviceBits) {
  CpuDevice cpu;
  DetachedCpuDevice detached;
  expect_same_bits(
      kernels(cpu), kernels(detached),
      {"linear y", "loss", "dlogits", "dw", "db", "dx", "embedding", "attention stats", "attention out"});
}

// ---- host memory given as device memory ------------------------------------------------------

// Runs `call`, expecting a zl::Error whose message holds `expected`.
void expect_error(const std::function<void()>& call, const std::string& expected) {
  try {
    call();
    ADD_FAILURE() << "no error; expected one containing: " << expected;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
  }
}

TEST(DetachedDevice, HostMemoryGivenToACallIsAnError) {
  DetachedCpuDevice device;
  DetachedCpuDevice other;
  std::vector<float> host(16, 1.0f);
  Buffer y = device.alloc(MemCategory::Activations, DType::F32, {16});
  Buffer elsewhere = other.alloc(MemCategory::Activations, DType::F32, {16});
  expect_error([&] { device.gelu_forward(host, y.as<float>()); },
               "DetachedCpuDevice::gelu_forward was given host memory");
  expect_error([&] { device.scale(std::span<float>(host), 2.0f); },
               "DetachedCpuDevice::scale was given host memory");
  expect_error([&] { device.copy(y.data(), host.data(), 64); },
               "DetachedCpuDevice::copy was given host memory");
  expect_error([&] { device.gelu_forward(elsewhere.as<float>(), y.as<float>()); },
               "DetachedCpuDevice::gelu_forward was given another device's memory");
  expect_error([&] { device.copy_from_host(y.data(), y.data(), 64); },
               "DetachedCpuDevice::copy_from_host was given device memory");
  const std::vector<std::int64_t> labels{0, 1, 2, 3};
  expect_error(
      [&] { device.cross_entropy_forward_backward(y.as<float>(), labels, y.as<float>(), 4, 4, 4); },
      "DetachedCpuDevice::cross_entropy_forward_backward was given host memory");
  // Empty spans and zero bytes are no memory at all, wherever they point.
  device.gelu_forward(std::span<const float>(host.data(), 0), std::span<float>(host.data(), 0));
  device.copy(host.data(), host.data(), 0);
}

// ---- the arena -----------------------------------------------------------------------------

TEST(DetachedDevice, FreedMemoryComesBackZeroed) {
  DetachedCpuDevice device;
  const std::vector<float> ones(1 << 18, 1.0f);  // 1 MiB
  const void* first = nullptr;
  {
    Buffer buffer = upload(device, DType::F32, ones);
    first = buffer.data();
  }
  Buffer again = device.alloc(MemCategory::Params, DType::F32, {1 << 18});
  EXPECT_EQ(again.data(), first) << "first fit reuses the freed range";
  const Bytes bytes = download(device, again);
  EXPECT_EQ(bytes, Bytes(bytes.size())) << "reused memory must read as zero";
}

TEST(DetachedDevice, FreedRangesAreSplitAndCoalesced) {
  DetachedCpuDevice device;
  constexpr std::size_t kPage = 4096;
  void* a = device.allocate(kPage);
  void* b = device.allocate(3 * kPage);
  void* c = device.allocate(1);  // rounded to a page
  EXPECT_EQ(static_cast<std::byte*>(b), static_cast<std::byte*>(a) + kPage);
  EXPECT_EQ(static_cast<std::byte*>(c), static_cast<std::byte*>(b) + 3 * kPage);
  device.deallocate(b, 3 * kPage);
  void* in_b = device.allocate(2 * kPage);
  void* rest_of_b = device.allocate(kPage);
  EXPECT_EQ(in_b, b);
  EXPECT_EQ(static_cast<std::byte*>(rest_of_b), static_cast<std::byte*>(b) + 2 * kPage);
  const std::vector<std::pair<void*, std::size_t>> live{
      {a, kPage}, {in_b, 2 * kPage}, {c, 1}, {rest_of_b, kPage}};
  for (const auto& [ptr, bytes] : live) device.deallocate(ptr, bytes);
  // Everything coalesced back into one range: the whole arena, and then nothing more.
  void* all = device.allocate(device.arena_bytes());
  EXPECT_EQ(all, a);
  expect_error([&] { device.allocate(1); }, "no free range");
  device.deallocate(all, device.arena_bytes());
}

TEST(DetachedDevice, ManyAllocationsDoNotExhaustTheArena) {
  DetachedCpuDevice device;
  constexpr int kAllocations = 100'000;
  constexpr std::int64_t kElems = 1 << 18;  // 1 MiB of fp32
  const std::vector<float> ones(kElems, 1.0f);
  std::vector<Buffer> live(8);
  std::size_t total_bytes = 0;
  for (int i = 0; i < kAllocations; ++i) {
    Buffer& slot = live[static_cast<std::size_t>(i) % live.size()];
    slot = device.alloc(MemCategory::Activations, DType::F32, {kElems});
    total_bytes += static_cast<std::size_t>(slot.bytes());
    if (i % 10'000 == 0) {
      ASSERT_EQ(download(device, slot), Bytes(static_cast<std::size_t>(slot.bytes())))
          << "allocation " << i;
      device.copy_from_host(slot.data(), ones.data(), ones.size() * sizeof(float));
    }
  }
  EXPECT_GT(total_bytes, device.arena_bytes()) << "the test must allocate more than the arena";
}

// ---- the simulator's collectives on detached buffers -----------------------------------------

constexpr int kWorld = 3;
constexpr std::size_t kCountElems = 1001;

// Rank `rank`'s outputs of all_reduce (sum, avg), reduce_scatter, all_gather (out of place and in
// place) and broadcast on fp32 buffers made by `make` and read by `read`.
template <class Make, class Read>
std::vector<std::vector<float>> collectives(Comm& comm, Make make, Read read) {
  const auto rank = static_cast<std::size_t>(comm.rank());
  const std::size_t world = kWorld;
  std::vector<std::vector<float>> out;
  auto sum = make(mixed_values(rank, kCountElems));
  comm.all_reduce(sum.data(), kCountElems, DType::F32, ReduceOp::Sum);
  out.push_back(read(sum));
  auto avg = make(mixed_values(rank + 10, kCountElems));
  comm.all_reduce(avg.data(), kCountElems, DType::F32, ReduceOp::Avg);
  out.push_back(read(avg));
  auto scatter_send = make(mixed_values(rank + 20, world * kCountElems));
  auto scatter_recv = make(std::vector<float>(kCountElems));
  comm.reduce_scatter(scatter_send.data(), scatter_recv.data(), kCountElems, DType::F32,
                      ReduceOp::Sum);
  out.push_back(read(scatter_recv));
  auto gather_send = make(mixed_values(rank + 30, kCountElems));
  auto gather_recv = make(std::vector<float>(world * kCountElems));
  comm.all_gather(gather_send.data(), gather_recv.data(), kCountElems, DType::F32);
  out.push_back(read(gather_recv));
  std::vector<float> in_place_values(world * kCountElems);
  const std::vector<float> own = mixed_values(rank + 40, kCountElems);
  std::copy(own.begin(), own.end(),
            in_place_values.begin() + static_cast<std::ptrdiff_t>(rank * kCountElems));
  auto in_place = make(in_place_values);
  comm.all_gather(static_cast<std::byte*>(static_cast<void*>(in_place.data())) +
                      rank * kCountElems * sizeof(float),
                  in_place.data(), kCountElems, DType::F32);
  out.push_back(read(in_place));
  auto broadcast = make(mixed_values(rank + 50, kCountElems));
  comm.broadcast(broadcast.data(), kCountElems, DType::F32, 1);
  out.push_back(read(broadcast));
  return out;
}

// Outputs per rank of collectives() on host vectors, or on each rank's detached device.
std::vector<std::vector<std::vector<float>>> run_collectives(
    std::vector<std::unique_ptr<DetachedCpuDevice>>* devices) {
  SimWorld world(kWorld);
  std::vector<std::vector<std::vector<float>>> outputs(kWorld);
  world.run([&](Comm& comm) {
    const auto rank = static_cast<std::size_t>(comm.rank());
    if (devices == nullptr) {
      outputs[rank] = collectives(
          comm, [](std::vector<float> values) { return values; },
          [](const std::vector<float>& values) { return values; });
      return;
    }
    Device& device = *(*devices)[rank];
    outputs[rank] = collectives(
        comm, [&](const std::vector<float>& values) { return upload(device, DType::F32, values); },
        [&](const Buffer& buffer) {
          std::vector<float> values(static_cast<std::size_t>(buffer.elems()));
          device.copy_to_host(values.data(), buffer.data(),
                              static_cast<std::size_t>(buffer.bytes()));
          return values;
        });
  });
  return outputs;
}

std::vector<std::unique_ptr<DetachedCpuDevice>> detached_devices() {
  std::vector<std::unique_ptr<DetachedCpuDevice>> devices;
  for (int r = 0; r < kWorld; ++r) devices.push_back(std::make_unique<DetachedCpuDevice>());
  return devices;
}

TEST(DetachedCollectives, GiveTheBitsOfHostBuffers) {
  detached_collective_memory();
  std::vector<std::unique_ptr<DetachedCpuDevice>> devices = detached_devices();
  const auto host = run_collectives(nullptr);
  const auto detached = run_collectives(&devices);
  const char* names[] = {"all_reduce sum", "all_reduce avg",      "reduce_scatter",
                         "all_gather",     "all_gather in place", "broadcast"};
  for (int r = 0; r < kWorld; ++r) {
    for (std::size_t k = 0; k < std::size(names); ++k) {
      const std::vector<float>& want = host[static_cast<std::size_t>(r)][k];
      const std::vector<float>& got = detached[static_cast<std::size_t>(r)][k];
      ASSERT_EQ(want.size(), got.size()) << names[k] << " on rank " << r;
      EXPECT_EQ(std::memcmp(want.data(), got.data(), want.size() * sizeof(float)), 0)
          << names[k] << " on rank " << r << " differs from the host buffers'";
    }
  }
}

TEST(DetachedCollectives, HostAndDetachedBuffersAcrossRanksAreAnError) {
  detached_collective_memory();
  std::vector<std::unique_ptr<DetachedCpuDevice>> devices = detached_devices();
  SimWorld world(kWorld);
  try {
    world.run([&](Comm& comm) {
      const auto rank = static_cast<std::size_t>(comm.rank());
      std::vector<float> host(kCountElems);
      Buffer detached = devices[rank]->alloc(MemCategory::CommBuffer, DType::F32,
                                             {static_cast<std::int64_t>(kCountElems)});
      void* data = rank == 0 ? static_cast<void*>(host.data()) : detached.data();
      comm.all_reduce(data, kCountElems, DType::F32, ReduceOp::Sum);
    });
    ADD_FAILURE() << "mixing host and detached buffers did not fail";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("rank 1 passed device memory"), std::string::npos) << message;
    EXPECT_NE(message.find("rank 0 passed host memory"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace zl
