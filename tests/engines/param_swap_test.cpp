// param_swap_test.cpp — the NVMe tier for ZeRO-3's parameter shards (engines/param_swap.hpp): a
// unit is in a swap buffer only while held or on its way, comes back with the bytes its last
// writer left, is written back only when a holder wrote it; reads go ahead and writes go on as
// far as the buffers allow; max_in_cpu and buffer_size are DeepSpeed's; and a file changed or
// removed under the run ends in one line naming the file and what to do.
#include "engines/param_swap.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "support/error_of.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;
using test::error_of;

class ParamSwapTest : public ::testing::Test {
 protected:
  ParamSwapTest() { fs::create_directories(folder_); }
  ~ParamSwapTest() override { fs::remove_all(folder_); }

  const fs::path folder_ =
      fs::temp_directory_path() / ("zl_param_swap_test_" + std::to_string(::getpid()));
  CpuDevice device_;
};

std::vector<std::uint16_t> bits_of(TypedSpan span) {
  std::vector<std::uint16_t> bits(static_cast<std::size_t>(span.elems));
  std::memcpy(bits.data(), span.data, bits.size() * sizeof(std::uint16_t));
  return bits;
}

void set_bits(TypedSpan span, const std::vector<std::uint16_t>& bits) {
  ASSERT_EQ(span.elems, static_cast<std::int64_t>(bits.size()));
  std::memcpy(span.data, bits.data(), bits.size() * sizeof(std::uint16_t));
}

// bf16 units of 3, none and 5 elements: 16 bytes booked on disk (the file pads each unit to a
// page), two swap buffers of the largest shard (5 elements) in host memory, a unit written back by
// the last holder when one wrote.
TEST_F(ParamSwapTest, AHeldUnitIsInASwapBufferAndComesBackAsItsLastWriterLeftIt) {
  const MemoryLedger& ledger = device_.ledger();
  {
    ParamSwap swap(device_, nullptr, folder_, DType::BF16, {3, 0, 5}, {.count = 2, .max_elems = 5});
    EXPECT_EQ(ledger.current_bytes(MemCategory::NvmeParams), 16);
    EXPECT_EQ(ledger.current_bytes(MemCategory::HostParams), 2 * 5 * 2) << "the pool";
    EXPECT_EQ(fs::file_size(swap.file().path()), 2u * 4096u);
    EXPECT_TRUE(swap.on_disk(0));
    EXPECT_FALSE(swap.on_disk(1));
    EXPECT_EQ(swap.placeholder(2).data, nullptr);
    EXPECT_EQ(swap.placeholder(2).elems, 5);

    const std::vector<std::uint16_t> values = {0x3F80, 0xC000, 0x0001, 0x7F7F, 0x8000};
    EXPECT_EQ(bits_of(swap.hold(2)), std::vector<std::uint16_t>(5, 0));  // never written: zeros
    set_bits(swap.hold(2), values);  // a second holder writes
    swap.release(2, /*written=*/true);
    swap.settle(false);
    EXPECT_EQ(swap.file().totals().written_bytes, 0) << "one holder is left";
    swap.release(2, /*written=*/false);  // the last: the other's write goes to disk
    swap.settle(false);
    EXPECT_EQ(swap.file().totals().written_bytes, 10);
    EXPECT_EQ(bits_of(swap.hold(2)), values);
    swap.release(2, /*written=*/false);
    swap.settle(false);
    EXPECT_EQ(swap.file().totals().written_bytes, 10) << "nothing written, nothing to write";
    EXPECT_EQ(swap.file().totals().read_bytes, 10) << "a unit never written is not read";
    EXPECT_EQ(ledger.current_bytes(MemCategory::HostParams), 2 * 5 * 2) << "the pool, no more";
    EXPECT_NE(error_of([&] { swap.release(2, false); }).find("which no one holds"),
              std::string::npos);
  }
  EXPECT_TRUE(fs::is_empty(folder_)) << "the swap file stays";
  EXPECT_EQ(ledger.current_bytes(MemCategory::NvmeParams), 0);
  EXPECT_EQ(ledger.current_bytes(MemCategory::HostParams), 0);
}

// Four units of 4 fp16 elements through three buffers: reads ahead take a buffer while one more
// stays free; a hold takes a read ahead over, or a buffer from the newest read ahead when none is
// free; a write goes on while a buffer stays free and a hold of its unit takes it back; a hold
// with every buffer held is one line naming buffer_count.
TEST_F(ParamSwapTest, ReadsGoAheadAndWritesGoOnWhileABufferStaysFree) {
  ParamSwap swap(device_, nullptr, folder_, DType::F16, {4, 4, 4, 4}, {.count = 3, .max_elems = 4});
  std::vector<std::vector<std::uint16_t>> values;
  for (std::size_t u = 0; u < 4; ++u) {
    values.push_back({static_cast<std::uint16_t>(u + 1), 7, 8, static_cast<std::uint16_t>(9 * u)});
    set_bits(swap.hold(u), values[u]);
    swap.release(u, /*written=*/true);
  }
  swap.settle(false);
  EXPECT_EQ(swap.file().totals().written_bytes, 4 * 8);
  EXPECT_TRUE(swap.read_ahead(1));
  EXPECT_TRUE(swap.read_ahead(1)) << "already on its way";
  EXPECT_TRUE(swap.read_ahead(2));
  EXPECT_FALSE(swap.read_ahead(3)) << "the last free buffer is the next hold's";
  EXPECT_EQ(bits_of(swap.hold(1)), values[1]);
  EXPECT_EQ(swap.reads_ahead_taken(), 1);
  EXPECT_EQ(bits_of(swap.hold(0)), values[0]);
  EXPECT_EQ(bits_of(swap.hold(3)), values[3]) << "unit 2's read ahead gave up its buffer";
  EXPECT_EQ(swap.reads_ahead_taken(), 1);
  EXPECT_EQ(error_of([&] { swap.hold(2); }),
            "offload_param.buffer_count 3 is too small: more parameter units are held at once: "
            "raise it (--param-buffer-count)");
  values[3][0] = 0x5555;
  set_bits(swap.hold(3), values[3]);
  swap.release(3, /*written=*/true);
  swap.release(3, /*written=*/false);  // its write goes on: unit 3's buffer is not free yet
  EXPECT_FALSE(swap.read_ahead(2));
  EXPECT_EQ(bits_of(swap.hold(3)), values[3]) << "taken back from its write";
  swap.release(3, false);
  swap.release(1, false);
  swap.release(0, false);
  swap.settle(false);
  const std::int64_t read_before = swap.file().totals().read_bytes;
  for (std::size_t u = 0; u < 4; ++u) {
    EXPECT_EQ(bits_of(swap.hold(u)), values[u]) << u;
    swap.release(u, false);
  }
  EXPECT_EQ(swap.file().totals().read_bytes - read_before, 4 * 8);
}

// max_in_cpu keeps the first offloaded shards in host memory while they fit, every later one on
// disk; buffer_size must hold each shard on disk.
TEST_F(ParamSwapTest, MaxInCpuKeepsAPrefixAndBufferSizeHoldsEachShard) {
  using Disk = std::vector<bool>;
  EXPECT_EQ(shards_on_disk({3, 0, 5, 2}, 0), (Disk{true, false, true, true}));
  EXPECT_EQ(shards_on_disk({3, 0, 5, 2}, 3), (Disk{false, false, true, true}));
  EXPECT_EQ(shards_on_disk({3, 0, 5, 2}, 7), (Disk{false, false, true, true}));
  EXPECT_EQ(shards_on_disk({3, 0, 5, 2}, 8), (Disk{false, false, false, true}));
  EXPECT_EQ(shards_on_disk({3, 0, 5, 2}, 10), (Disk{false, false, false, false}));
  EXPECT_EQ(shards_on_disk({5, 1, 1}, 4), (Disk{true, true, true})) << "a prefix, not a packing";
  EXPECT_EQ(swap_buffer_elems({3, 0, 5}, 5), 5);
  EXPECT_EQ(swap_buffer_elems({0, 0}, 1), 0);
  EXPECT_EQ(error_of([&] {
              ParamSwap swap(device_, nullptr, folder_, DType::BF16, {3, 6},
                             {.count = 2, .max_elems = 5});
            }),
            "offload_param.buffer_size 5 cannot hold parameter unit 1's shard of 6 elements: "
            "raise it to at least 6 (--param-buffer-size)");
  EXPECT_TRUE(fs::is_empty(folder_)) << "refused before any file";
}

TEST_F(ParamSwapTest, AFileChangedOrRemovedUnderTheRunIsOneLine) {
  const std::vector<std::uint16_t> values = {1, 2, 3, 4};
  {
    ParamSwap swap(device_, nullptr, folder_, DType::F16, {4}, {});
    set_bits(swap.hold(0), values);
    swap.release(0, true);
    swap.settle(false);  // the write is on disk
    std::fstream(swap.file().path(), std::ios::in | std::ios::out | std::ios::binary)
        .seekp(2)
        .write("\x7f", 1);
    const std::string error = error_of([&] { swap.hold(0); });
    EXPECT_EQ(error, "the swap file " + swap.file().path().string() +
                         " was changed under this run (parameter unit 0 reads back other bytes "
                         "than were written): keep --param-nvme-path for this run alone and start "
                         "it again");
  }
  {
    ParamSwap swap(device_, nullptr, folder_, DType::F16, {4}, {});
    set_bits(swap.hold(0), values);
    swap.release(0, true);
    swap.settle(false);  // the write is on disk
    fs::remove(swap.file().path());
    EXPECT_EQ(error_of([&] { swap.hold(0); }),
              "the swap file " + swap.file().path().string() +
                  " was removed under this run: keep --param-nvme-path for this run alone and "
                  "start it again");
  }
  EXPECT_EQ(error_of([&] {
              ParamSwap swap(device_, nullptr, "/proc", DType::BF16, {4}, {});
            }).find("cannot create the swap file /proc/zerolab-"),
            0u);
}

}  // namespace
}  // namespace zl
