// param_swap_test.cpp — the NVMe tier for ZeRO-3's parameter shards (engines/param_swap.hpp): a
// unit is in host memory only while held, comes back with the bytes its last writer left, is
// written back only when a holder wrote it, and a file changed or removed under the run ends in
// one line naming the file and what to do.
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
// page), host memory only while held, written back by the last holder when one wrote.
TEST_F(ParamSwapTest, AHeldUnitIsInHostMemoryAndComesBackAsItsLastWriterLeftIt) {
  const MemoryLedger& ledger = device_.ledger();
  {
    ParamSwap swap(device_, nullptr, folder_, DType::BF16, {3, 0, 5});
    EXPECT_EQ(ledger.current_bytes(MemCategory::NvmeParams), 16);
    EXPECT_EQ(fs::file_size(swap.file().path()), 2u * 4096u);
    EXPECT_TRUE(swap.on_disk(0));
    EXPECT_FALSE(swap.on_disk(1));
    EXPECT_EQ(swap.placeholder(2).data, nullptr);
    EXPECT_EQ(swap.placeholder(2).elems, 5);

    const std::vector<std::uint16_t> values = {0x3F80, 0xC000, 0x0001, 0x7F7F, 0x8000};
    EXPECT_EQ(bits_of(swap.hold(2)), std::vector<std::uint16_t>(5, 0));  // never written: zeros
    EXPECT_EQ(ledger.current_bytes(MemCategory::HostParams), 10);
    set_bits(swap.hold(2), values);  // a second holder writes
    swap.release(2, /*written=*/true);
    EXPECT_EQ(ledger.current_bytes(MemCategory::HostParams), 10) << "one holder is left";
    EXPECT_EQ(swap.file().totals().written_bytes, 0);
    swap.release(2, /*written=*/false);  // the last: the other's write goes to disk
    EXPECT_EQ(ledger.current_bytes(MemCategory::HostParams), 0);
    EXPECT_EQ(swap.file().totals().written_bytes, 10);
    EXPECT_EQ(bits_of(swap.hold(2)), values);
    swap.release(2, /*written=*/false);
    EXPECT_EQ(swap.file().totals().written_bytes, 10) << "nothing written, nothing to write";
    EXPECT_EQ(swap.file().totals().read_bytes, 10) << "a unit never written is not read";
    EXPECT_NE(error_of([&] { swap.release(2, false); }).find("which no one holds"),
              std::string::npos);
  }
  EXPECT_TRUE(fs::is_empty(folder_)) << "the swap file stays";
  EXPECT_EQ(ledger.current_bytes(MemCategory::NvmeParams), 0);
}

TEST_F(ParamSwapTest, AFileChangedOrRemovedUnderTheRunIsOneLine) {
  const std::vector<std::uint16_t> values = {1, 2, 3, 4};
  {
    ParamSwap swap(device_, nullptr, folder_, DType::F16, {4});
    set_bits(swap.hold(0), values);
    swap.release(0, true);
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
    ParamSwap swap(device_, nullptr, folder_, DType::F16, {4});
    set_bits(swap.hold(0), values);
    swap.release(0, true);
    fs::remove(swap.file().path());
    EXPECT_EQ(error_of([&] { swap.hold(0); }),
              "the swap file " + swap.file().path().string() +
                  " was removed under this run: keep --param-nvme-path for this run alone and "
                  "start it again");
  }
  EXPECT_EQ(error_of([&] {
              ParamSwap swap(device_, nullptr, "/proc", DType::BF16, {4});
            }).find("cannot create the swap file /proc/zerolab-"),
            0u);
}

}  // namespace
}  // namespace zl
