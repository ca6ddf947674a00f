// buffer_test.cpp — buffers book their bytes for exactly their lifetime; the ledger keeps peaks.
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
