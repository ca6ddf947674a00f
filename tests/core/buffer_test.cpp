// buffer_test.cpp — buffers book their bytes for exactly their lifetime; the ledger keeps peaks:
// per category, in total, and over the device and the host categories apart.
#include <gtest/gtest.h>

#include <cstdlib>
#include <new>

#include "core/buffer.hpp"
#include "core/memory_ledger.hpp"

namespace zl {
namespace {

class TestAllocator final : public Allocator {
 public:
  void* allocate(std::size_t bytes) override {
    ++live;
    return std::calloc(bytes, 1);
  }
  void deallocate(void* ptr, std::size_t) override {
    --live;
    std::free(ptr);
  }
  int live = 0;
};

TEST(Buffer, BooksBytesForItsLifetime) {
  TestAllocator allocator;
  MemoryLedger ledger;
  {
    Buffer params(allocator, ledger, MemCategory::Params, DType::F32, {3, 4});
    EXPECT_EQ(params.elems(), 12);
    EXPECT_EQ(params.bytes(), 48);
    EXPECT_EQ(ledger.current_bytes(MemCategory::Params), 48);
    for (const float value : params.as<float>()) EXPECT_EQ(value, 0.0f);
    Buffer grads(allocator, ledger, MemCategory::Grads, DType::BF16, {10});
    EXPECT_EQ(ledger.current_bytes(MemCategory::Grads), 20);
    EXPECT_EQ(ledger.total_current_bytes(), 68);
    Buffer moved = std::move(grads);
    EXPECT_EQ(ledger.current_bytes(MemCategory::Grads), 20);  // a move books nothing new
    EXPECT_EQ(moved.as<std::uint16_t>().size(), 10u);
    EXPECT_THROW((void)moved.as<float>(), Error);
  }
  EXPECT_EQ(allocator.live, 0);
  EXPECT_EQ(ledger.total_current_bytes(), 0);
  EXPECT_EQ(ledger.peak_bytes(MemCategory::Params), 48);
  EXPECT_EQ(ledger.total_peak_bytes(), 68);
}

TEST(Buffer, PeakIsTheHighestMoment) {
  TestAllocator allocator;
  MemoryLedger ledger;
  for (int i = 0; i < 3; ++i) {
    Buffer temp(allocator, ledger, MemCategory::Gathered, DType::F32, {100});
  }
  EXPECT_EQ(ledger.current_bytes(MemCategory::Gathered), 0);
  EXPECT_EQ(ledger.peak_bytes(MemCategory::Gathered), 400);  // one at a time, never 1200
}

// The activations' breakdown is the one of their highest moment: a checkpoint kept after the
// peak does not enter it, and a moved buffer keeps its kind.
// The device and host peaks are the highest moments of each side's sum, not sums of peaks.
TEST(Buffer, DeviceAndHostPeaksAreEachSidesHighestMoment) {
  MemoryLedger ledger;
  ledger.book(MemCategory::Params, 100);
  ledger.book(MemCategory::Activations, 50);  // device 150
  ledger.book(MemCategory::HostParams, 30);   // host 30, total 180
  ledger.release(MemCategory::Activations, 50);
  ledger.book(MemCategory::Grads, 70);          // device 170: its peak
  ledger.release(MemCategory::HostParams, 30);  // host 0
  ledger.book(MemCategory::HostMaster, 40);     // host 40: its peak; total 210
  ledger.book(MemCategory::HostOptimizer, 20);  // host 60, total 230
  ledger.release(MemCategory::HostOptimizer, 20);
  EXPECT_EQ(ledger.device_peak_bytes(), 170);  // not 100 + 50 + 70
  EXPECT_EQ(ledger.host_peak_bytes(), 60);     // not 30 + 40 + 20
  EXPECT_EQ(ledger.total_peak_bytes(), 230);
  EXPECT_EQ(ledger.device_current_bytes(), 170);
  EXPECT_EQ(ledger.host_current_bytes(), 40);
  EXPECT_EQ(ledger.device_current_bytes() + ledger.host_current_bytes(),
            ledger.total_current_bytes());
}

TEST(Buffer, ActivationKindsAreReadAtTheActivationsPeak) {
  TestAllocator allocator;
  MemoryLedger ledger;
  Buffer kept(allocator, ledger, MemCategory::Activations, DType::F32, {10},
              ActivationKind::Checkpoint);
  {
    Buffer probs(allocator, ledger, MemCategory::Activations, DType::F32, {100},
                 ActivationKind::Attention);
    Buffer moved = std::move(probs);
    Buffer scratch(allocator, ledger, MemCategory::Activations, DType::F32, {5});
    EXPECT_EQ(ledger.activation_bytes(ActivationKind::Attention), 400);
  }
  Buffer recompute(allocator, ledger, MemCategory::Activations, DType::F32, {50},
                   ActivationKind::Recompute);
  EXPECT_EQ(ledger.peak_bytes(MemCategory::Activations), 40 + 400 + 20);
  EXPECT_EQ(ledger.activation_bytes_at_peak(ActivationKind::Checkpoint), 40);
  EXPECT_EQ(ledger.activation_bytes_at_peak(ActivationKind::Attention), 400);
  EXPECT_EQ(ledger.activation_bytes_at_peak(ActivationKind::Scratch), 20);
  EXPECT_EQ(ledger.activation_bytes_at_peak(ActivationKind::Recompute), 0);
  EXPECT_EQ(ledger.activation_bytes(ActivationKind::Attention), 0);
  EXPECT_EQ(ledger.activation_bytes(ActivationKind::Recompute), 200);
  EXPECT_THROW(ledger.release(MemCategory::Activations, 200, ActivationKind::Block), Error);
}

TEST(Buffer, RejectsNegativeShapes) {
  TestAllocator allocator;
  MemoryLedger ledger;
  EXPECT_THROW(Buffer(allocator, ledger, MemCategory::Params, DType::F32, {2, -1}), Error);
  EXPECT_EQ(ledger.total_current_bytes(), 0);
}

}  // namespace
}  // namespace zl
