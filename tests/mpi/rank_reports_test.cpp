// rank_reports_test.cpp — what an mpi run's ranks send to rank 0 comes back as it was: the memory
// ledger's current and peak bytes per category and its total, device and host peaks, the traffic
// ledger's bytes and calls per collective, the step times, and checkpoint file entries; damaged
// bytes are an error.
#include "run/rank_reports.hpp"

#include <gtest/gtest.h>

#include "core/error.hpp"

namespace zl {
namespace {

TEST(MpiReports, RankTotalsComeBackAsTheyWere) {
  RankTotals totals;
  totals.report.rank = 3;
  MemoryLedger& memory = totals.report.memory;
  // Activations peak early while little else is held; params stay; the total peak is their sum
  // with the host gradients of the time. At their peak they are attention and logits; afterwards
  // a checkpoint stays. The device peak (1300) and the host peak (120) are not a moment's split
  // of the total's only by chance: the host master comes later, when the device holds less.
  memory.book(MemCategory::Params, 400);
  memory.book(MemCategory::HostGrads, 120);
  memory.book(MemCategory::Activations, 600, ActivationKind::Attention);
  memory.book(MemCategory::Activations, 300, ActivationKind::Logits);
  memory.release(MemCategory::Activations, 600, ActivationKind::Attention);
  memory.release(MemCategory::Activations, 300, ActivationKind::Logits);
  memory.release(MemCategory::HostGrads, 120);
  memory.book(MemCategory::Activations, 40, ActivationKind::Checkpoint);
  memory.book(MemCategory::Optimizer, 800);
  memory.book(MemCategory::Gathered, 50);
  memory.release(MemCategory::Gathered, 20);
  memory.book(MemCategory::HostMaster, 100);
  // Swap files on disk are in no total: the totals below stay those of memory.
  memory.book(MemCategory::NvmeOptimizer, 5000);
  memory.book(MemCategory::NvmeMaster, 2500);
  memory.release(MemCategory::NvmeMaster, 500);
  TrafficLedger& traffic = totals.report.traffic;
  traffic.record(CollectiveKind::AllReduce, {100, 90});
  traffic.record(CollectiveKind::AllReduce, {7, 8});
  traffic.record(CollectiveKind::Barrier, {});
  traffic.record_level(LinkLevel::Inside, 100);
  traffic.record_level(LinkLevel::Spanning, 7);
  traffic.record_to_host(11);
  traffic.record_to_device(13);
  totals.steps = {{.step = 0,
                   .start_ms = 0.5,
                   .compute_ms = 1.25,
                   .comm_ms = 0.75,
                   .exposed_comm_ms = 0.5,
                   .step_ms = 2.0},
                  {.step = 1,
                   .start_ms = 2.5,
                   .compute_ms = 1.0,
                   .comm_ms = 0.25,
                   .exposed_comm_ms = 0.125,
                   .copy_ms = 0.0625,
                   .step_ms = 1.5}};

  const RankTotals back = decode_rank_totals(encode_rank_totals(totals));
  EXPECT_EQ(back.report.rank, 3);
  for (int l = 0; l < kLinkLevelCount; ++l) {
    const auto level = static_cast<LinkLevel>(l);
    EXPECT_EQ(back.report.traffic.sent_bytes(level), traffic.sent_bytes(level)) << l;
  }
  for (int c = 0; c < kMemCategoryCount; ++c) {
    const auto category = static_cast<MemCategory>(c);
    EXPECT_EQ(back.report.memory.current_bytes(category), memory.current_bytes(category)) << c;
    EXPECT_EQ(back.report.memory.peak_bytes(category), memory.peak_bytes(category)) << c;
  }
  EXPECT_EQ(back.report.memory.total_current_bytes(), memory.total_current_bytes());
  EXPECT_EQ(back.report.memory.total_peak_bytes(), 1420);
  EXPECT_EQ(back.report.memory.device_peak_bytes(), 1300);
  EXPECT_EQ(back.report.memory.host_peak_bytes(), 120);
  EXPECT_EQ(back.report.memory.device_current_bytes(), memory.device_current_bytes());
  EXPECT_EQ(back.report.memory.host_current_bytes(), 100);
  for (int k = 0; k < kActivationKindCount; ++k) {
    const auto kind = static_cast<ActivationKind>(k);
    EXPECT_EQ(back.report.memory.activation_bytes(kind), memory.activation_bytes(kind)) << k;
    EXPECT_EQ(back.report.memory.activation_bytes_at_peak(kind),
              memory.activation_bytes_at_peak(kind))
        << k;
  }
  EXPECT_EQ(back.report.memory.activation_bytes_at_peak(ActivationKind::Attention), 600);
  EXPECT_EQ(back.report.memory.activation_bytes(ActivationKind::Checkpoint), 40);
  EXPECT_EQ(back.report.memory.total_peak_bytes(), memory.total_peak_bytes());
  for (int k = 0; k < kCollectiveKindCount; ++k) {
    const auto kind = static_cast<CollectiveKind>(k);
    EXPECT_EQ(back.report.traffic.sent_bytes(kind), traffic.sent_bytes(kind)) << k;
    EXPECT_EQ(back.report.traffic.recv_bytes(kind), traffic.recv_bytes(kind)) << k;
    EXPECT_EQ(back.report.traffic.calls(kind), traffic.calls(kind)) << k;
  }
  EXPECT_EQ(back.report.traffic.to_host_bytes(), 11);
  EXPECT_EQ(back.report.traffic.to_device_bytes(), 13);
  ASSERT_EQ(back.steps.size(), 2u);
  EXPECT_EQ(back.steps[1].step, 1);
  EXPECT_EQ(back.steps[1].exposed_comm_ms, 0.125);
  EXPECT_EQ(back.steps[1].copy_ms, 0.0625);
  EXPECT_EQ(back.steps[0].step_ms, 2.0);
}

TEST(MpiReports, RankFilesComeBackAsTheyWere) {
  const RankFile written{.entry = {.name = "rank-2.safetensors",
                                   .size_bytes = 12345,
                                   .sha256 = std::string(64, 'a')}};
  EXPECT_EQ(decode_rank_file(encode_rank_file(written)), written);
  RankFile failed;
  failed.error = "cannot write x: No space left on device";
  EXPECT_EQ(decode_rank_file(encode_rank_file(failed)), failed);
}

TEST(MpiReports, DamagedBytesAreAnError) {
  const std::string bytes = encode_rank_file(
      {.entry = {.name = "rank-0.safetensors", .size_bytes = 1, .sha256 = "x"}});
  EXPECT_THROW(decode_rank_file(bytes.substr(0, bytes.size() - 1)), Error);
  EXPECT_THROW(decode_rank_file(bytes + "!"), Error);
  EXPECT_THROW(decode_rank_totals("short"), Error);
}

}  // namespace
}  // namespace zl
