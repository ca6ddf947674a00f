// nvme_swap_test.cpp — the NVMe tier's swap file under faults: what is written comes back, with
// O_DIRECT or through the page cache; a
// folder that cannot take the file, a disk without the room, and a file cut short, changed or
// removed under the run each end in one line naming the file and what to do, never in other
// numbers; and the master's first write (and a resume's) has ended when the call that made it
// returns, so an update's swaps are its own.
#include "engines/nvme_swap.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "engines/optimizer_step.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "support/error_of.hpp"

namespace zl {
namespace {

namespace fs = std::filesystem;
using test::error_of;

class NvmeSwapTest : public ::testing::Test {
 protected:
  NvmeSwapTest() { fs::create_directories(folder_); }
  ~NvmeSwapTest() override { fs::remove_all(folder_); }

  // The one swap file in the folder.
  fs::path swap_file() const { return fs::directory_iterator(folder_)->path(); }

  const fs::path folder_ =
      fs::temp_directory_path() / ("zl_nvme_swap_test_" + std::to_string(::getpid()));
  MemoryLedger ledger_;
};

// Units of 3 and 5 elements: master 4 + m and v 8 bytes per element, booked on disk only; in the
// file each part takes whole pages, as O_DIRECT moves them.
TEST_F(NvmeSwapTest, WhatIsWrittenComesBackAndUnwrittenUnitsAreZeros) {
  {
    NvmeSwap swap(ledger_, folder_, {3, 5});
    EXPECT_EQ(ledger_.current_bytes(MemCategory::NvmeMaster), 4 * 8);
    EXPECT_EQ(ledger_.current_bytes(MemCategory::NvmeOptimizer), 8 * 8);
    EXPECT_EQ(ledger_.total_current_bytes(), 0);
    EXPECT_EQ(fs::file_size(swap.file().path()), 6u * 4096u);
    const std::vector<float> master = {1, 2, 3, 4, 5}, m = {-1, -2, -3, -4, -5},
                             v = {0.5f, 0.25f, 0.125f, 1e-8f, 3e38f};
    swap.write(1, master, m, v);
    std::vector<float> master_back(5), m_back(5), v_back(5);
    swap.read(1, master_back, m_back, v_back);
    EXPECT_EQ(master_back, master);
    EXPECT_EQ(m_back, m);
    EXPECT_EQ(v_back, v);
    std::vector<float> zeros(3, 7.0f), m0(3, 7.0f), v0(3, 7.0f);
    swap.read(0, zeros, m0, v0);  // unit 0 was never written: Adam's initial zeros
    EXPECT_EQ(zeros, std::vector<float>(3, 0.0f));
    EXPECT_EQ(m0, std::vector<float>(3, 0.0f));
  }
  EXPECT_TRUE(fs::is_empty(folder_)) << "the swap file stays";
  EXPECT_EQ(ledger_.current_bytes(MemCategory::NvmeOptimizer), 0);
}

// A unit spanning many aio blocks (the last one's last page padded) comes back bit for bit, on
// the temporary folder's disk and on /dev/shm (tmpfs, which older kernels serve through the page
// cache), through io_uring where there is one and through the thread pool; the file counts the
// bytes it moved.
TEST_F(NvmeSwapTest, ALargeUnitComesBackDirectOrThroughTheCacheOnEitherBackend) {
  constexpr std::int64_t kElems = (1 << 20) / 4 + 1000;
  std::vector<float> master(kElems), m(kElems), v(kElems);
  for (std::int64_t i = 0; i < kElems; ++i) {
    master[i] = static_cast<float>(i) * 0.5f;
    m[i] = -static_cast<float>(i);
    v[i] = 1.0f / static_cast<float>(i + 1);
  }
  std::vector<fs::path> folders = {folder_};
  const fs::path shm = fs::path("/dev/shm") / ("zl_nvme_swap_test_" + std::to_string(::getpid()));
  if (fs::is_directory("/dev/shm") && fs::create_directories(shm)) folders.push_back(shm);
  for (const IoBackend backend : {IoBackend::Auto, IoBackend::Threads}) {
    const AioSettings aio{
        .block_bytes = 64 << 10, .queue_depth = 3, .thread_count = 2, .backend = backend};
    for (const fs::path& folder : folders) {
      NvmeSwap swap(ledger_, folder, {kElems}, aio);
      swap.write(0, master, m, v);
      std::vector<float> master_back(kElems), m_back(kElems), v_back(kElems);
      swap.read(0, master_back, m_back, v_back);
      const std::string where = folder.string() + " " + std::string(io_backend_name(backend));
      EXPECT_EQ(master_back, master) << where;
      EXPECT_EQ(m_back, m) << where;
      EXPECT_EQ(v_back, v) << where;
      const IoTotals totals = swap.file().totals();
      EXPECT_EQ(totals.written_bytes, 3 * kElems * 4) << where;
      EXPECT_EQ(totals.read_bytes, 3 * kElems * 4) << where;
      EXPECT_GT(totals.write_ms, 0.0) << where;
    }
  }
  fs::remove_all(shm);
}

TEST_F(NvmeSwapTest, AFolderThatCannotTakeTheFileIsOneLine) {
  EXPECT_EQ(error_of([&] {
              NvmeSwap swap(ledger_, "/proc", {4});
            }).find("cannot create the swap file /proc/zerolab-"),
            0u);
  const std::string full = error_of([&] { NvmeSwap swap(ledger_, folder_, {1LL << 40}); });
  EXPECT_NE(full.find("cannot reserve 13194139533312 bytes for the swap file"), std::string::npos)
      << full;
  EXPECT_NE(full.find("free space there or pass another --nvme-path"), std::string::npos) << full;
  EXPECT_TRUE(fs::is_empty(folder_)) << "a failed swap file stays";
  EXPECT_EQ(ledger_.current_bytes(MemCategory::NvmeOptimizer), 0);
}

TEST_F(NvmeSwapTest, AFileCutChangedOrRemovedUnderTheRunIsOneLine) {
  const std::vector<float> state(4, 1.5f);
  std::vector<float> master(4), m(4), v(4);
  const auto read = [&](NvmeSwap& swap) { return error_of([&] { swap.read(0, master, m, v); }); };
  {
    NvmeSwap swap(ledger_, folder_, {4});
    swap.write(0, state, state, state);
    fs::resize_file(swap.file().path(), 20);
    EXPECT_NE(read(swap).find("it ends early (cut short)"), std::string::npos) << read(swap);
  }
  {
    NvmeSwap swap(ledger_, folder_, {4});
    swap.write(0, state, state, state);
    std::fstream(swap.file().path(), std::ios::in | std::ios::out | std::ios::binary)
        .seekp(4)  // the master's second element
        .write("\x7f", 1);
    EXPECT_NE(read(swap).find("was changed under this run (unit 0 reads back other bytes"),
              std::string::npos)
        << read(swap);
  }
  {
    NvmeSwap swap(ledger_, folder_, {4});
    swap.write(0, state, state, state);
    fs::remove(swap.file().path());
    EXPECT_EQ(read(swap), "the swap file " + swap.file().path().string() +
                              " was removed under this run: keep --nvme-path for this run alone "
                              "and start it again");
  }
}

// With pipeline_write, writes go on while the next unit is taken; master_from_params (at init)
// and params_from_master (at a resume) still end with every unit back on disk, no write in
// flight: one still going would end inside the first update and count as its bytes.
TEST_F(NvmeSwapTest, SettingTheMasterEndsWithEveryWriteEnded) {
  CpuDevice device;
  std::vector<UnitLayout> layout(3);
  for (std::size_t u = 0; u < layout.size(); ++u) {
    layout[u].numel = layout[u].padded_elems = layout[u].shard_elems = 3 + 2 * std::int64_t(u);
  }
  TrainingFeatures features;
  features.precision = DType::BF16;
  features.offload_optimizer = true;
  features.nvme_path = folder_.string();
  features.pipeline_write = true;
  OptimizerState state = alloc_optimizer(device, layout, features, /*shard=*/false);
  std::vector<Buffer> params;
  std::vector<TypedSpan> owned;
  for (const UnitLayout& unit : layout) {
    params.push_back(device.alloc(MemCategory::Params, DType::BF16, {unit.numel}));
    owned.push_back(view_of(params.back()));
  }
  const auto expect_all_on_disk = [&](const char* after) {
    EXPECT_TRUE(state.nvme->writing().empty()) << after;
    for (std::size_t u = 0; u < layout.size(); ++u) {
      EXPECT_EQ(state.nvme->residency(u), Residency::OnDisk) << after << ", unit " << u;
    }
  };
  master_from_params(state, owned, device);
  expect_all_on_disk("master_from_params");
  params_from_master(state, owned, device);
  expect_all_on_disk("params_from_master");
}

}  // namespace
}  // namespace zl
