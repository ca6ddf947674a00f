// nccl_comm_test.cpp — NcclComm with one rank on one GPU (NCCL refuses two ranks on one device):
// each collective leaves the data as a world of one defines it, the async forms complete on
// wait(), host buffers are staged through the device, the traffic ledger holds what the sim
// would record (ring_volume for W = 1), and the watchdog aborts a call past the timeout.
// The bootstrap's environment handling and id exchange need no GPU and always run.
#include "comm/nccl/nccl_comm.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "comm/nccl/nccl_bootstrap.hpp"
#include "comm/nccl/nccl_library.hpp"
#include "comm/traffic_ledger.hpp"
#include "core/error.hpp"
#include "gpu_test_support.hpp"

namespace zl {
namespace {

// Sets environment variables for one test and restores them after.
class ScopedEnv {
 public:
  ScopedEnv& set(const char* name, const char* value) {
    const char* old = std::getenv(name);
    saved_.push_back({name, old != nullptr, old != nullptr ? old : ""});
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
    return *this;
  }
  ~ScopedEnv() {
    for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
      if (it->was_set) {
        ::setenv(it->name.c_str(), it->value.c_str(), 1);
      } else {
        ::unsetenv(it->name.c_str());
      }
    }
  }

 private:
  struct Saved {
    std::string name;
    bool was_set;
    std::string value;
  };
  std::vector<Saved> saved_;
};

std::string error_of(const auto& call) {
  try {
    call();
  } catch (const Error& error) {
    return error.what();
  }
  return "(no error)";
}

TEST(NcclBootstrap, MissingOrBadVariablesAreNamed) {
  ScopedEnv env;
  env.set("RANK", nullptr).set("WORLD_SIZE", nullptr).set("LOCAL_RANK", nullptr);
  EXPECT_NE(error_of([] { nccl_rank_from_env(); }).find("WORLD_SIZE is not set"),
            std::string::npos);
  env.set("WORLD_SIZE", "2").set("RANK", "two");
  EXPECT_NE(error_of([] { nccl_rank_from_env(); }).find("RANK=two is not an integer"),
            std::string::npos);
  env.set("RANK", "2");
  EXPECT_NE(error_of([] { nccl_rank_from_env(); }).find("RANK=2 is out of range for WORLD_SIZE=2"),
            std::string::npos);
  env.set("RANK", "1");
  EXPECT_NE(error_of([] { nccl_rank_from_env(); }).find("LOCAL_RANK is not set"),
            std::string::npos);
  env.set("LOCAL_RANK", "1");
  const NcclRankInfo info = nccl_rank_from_env();
  EXPECT_EQ(info.rank, 1);
  EXPECT_EQ(info.world, 2);
  EXPECT_EQ(info.local_rank, 1);
  env.set("ZL_NCCL_ID_FILE", nullptr).set("MASTER_ADDR", nullptr).set("MASTER_PORT", nullptr);
  EXPECT_NE(error_of([] { nccl_bootstrap_from_env(); }).find("neither ZL_NCCL_ID_FILE nor"),
            std::string::npos);
  env.set("ZL_NCCL_TIMEOUT_S", "0");
  EXPECT_NE(error_of([] { nccl_bootstrap_timeout(); }).find("ZL_NCCL_TIMEOUT_S=0"),
            std::string::npos);
}

TEST(NcclBootstrap, IdFileReachesTheOtherRanks) {
  const auto path = std::filesystem::temp_directory_path() /
                    ("zerolab_nccl_id_test." + std::to_string(::getpid()));
  std::filesystem::remove(path);
  ncclUniqueId from_rank1{};
  std::thread rank1([&] {
    from_rank1 = nccl_unique_id_from_file({1, 2, 1}, path, std::chrono::seconds(30)).id;
  });
  const ncclUniqueId from_rank0 =
      nccl_unique_id_from_file({0, 2, 0}, path, std::chrono::seconds(30)).id;
  rank1.join();
  EXPECT_EQ(std::string(from_rank0.internal, sizeof(from_rank0.internal)),
            std::string(from_rank1.internal, sizeof(from_rank1.internal)));
  std::filesystem::remove(path);
  // No rank 0: the wait ends with an error naming the path.
  EXPECT_NE(error_of([&] {
              nccl_unique_id_from_file({1, 2, 1}, path, std::chrono::seconds(1));
            }).find(path.string()),
            std::string::npos);
}

TEST(NcclBootstrap, IdReachesTheOtherRanksOverTcp) {
  const int port = 20000 + static_cast<int>(::getpid() % 20000);
  ncclUniqueId from_rank1{}, from_rank2{};
  std::thread rank1([&] {
    from_rank1 = nccl_unique_id_over_tcp({1, 3, 1}, "127.0.0.1", port, std::chrono::seconds(30)).id;
  });
  std::thread rank2([&] {
    from_rank2 = nccl_unique_id_over_tcp({2, 3, 2}, "127.0.0.1", port, std::chrono::seconds(30)).id;
  });
  const ncclUniqueId from_rank0 =
      nccl_unique_id_over_tcp({0, 3, 0}, "127.0.0.1", port, std::chrono::seconds(30)).id;
  rank1.join();
  rank2.join();
  const std::string expected(from_rank0.internal, sizeof(from_rank0.internal));
  EXPECT_EQ(std::string(from_rank1.internal, sizeof(from_rank1.internal)), expected);
  EXPECT_EQ(std::string(from_rank2.internal, sizeof(from_rank2.internal)), expected);
}

class GpuNcclTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ZL_REQUIRE_GPU();
    device_ = std::make_unique<CudaDevice>(0);
    NcclBootstrap bootstrap;
    bootstrap.rank = {0, 1, 0};
    ASSERT_EQ(nccl().GetUniqueId(&bootstrap.id), ncclSuccess);
    comm_ = std::make_unique<NcclComm>(*device_, bootstrap);
  }
  std::unique_ptr<CudaDevice> device_;
  std::unique_ptr<NcclComm> comm_;
};

TEST_F(GpuNcclTest, CollectivesOfOneRankAndTheirTraffic) {
  constexpr std::size_t kElems = 1001;
  const auto values = test::random_floats(kElems, 50);
  Buffer data = test::upload(*device_, values);
  comm_->all_reduce(data.data(), kElems, DType::F32, ReduceOp::Sum);
  test::expect_same_bits(test::download(*device_, data), values, "all_reduce sum");
  comm_->all_reduce(data.data(), kElems, DType::F32, ReduceOp::Avg);
  test::expect_same_bits(test::download(*device_, data), values, "all_reduce avg (W = 1)");
  Buffer out = device_->alloc(MemCategory::CommBuffer, DType::F32, {kElems});
  comm_->reduce_scatter(data.data(), out.data(), kElems, DType::F32, ReduceOp::Sum);
  test::expect_same_bits(test::download(*device_, out), values, "reduce_scatter");
  Buffer gathered = device_->alloc(MemCategory::Gathered, DType::F32, {kElems});
  comm_->all_gather(data.data(), gathered.data(), kElems, DType::F32);
  test::expect_same_bits(test::download(*device_, gathered), values, "all_gather");
  comm_->broadcast(data.data(), kElems, DType::F32, 0);
  test::expect_same_bits(test::download(*device_, data), values, "broadcast");
  comm_->barrier();

  // Async: compute queued before the call is seen by it; the result is there after wait().
  const auto doubled = test::random_floats(kElems, 51);
  Buffer late = test::upload(*device_, doubled);
  CommHandle handle = comm_->all_reduce_async(late.data(), kElems, DType::F32, ReduceOp::Sum);
  handle.wait();
  EXPECT_TRUE(handle.waited());
  test::expect_same_bits(test::download(*device_, late), doubled, "all_reduce_async");
  comm_->all_gather_async(data.data(), gathered.data(), kElems, DType::F32).wait();
  comm_->reduce_scatter_async(data.data(), out.data(), kElems, DType::F32, ReduceOp::Avg).wait();

  // The sim's record: one call each, ring volume for W = 1 (nothing leaves a world of one).
  const TrafficLedger& traffic = comm_->traffic();
  EXPECT_EQ(traffic.calls(CollectiveKind::AllReduce), 3);
  EXPECT_EQ(traffic.calls(CollectiveKind::ReduceScatter), 2);
  EXPECT_EQ(traffic.calls(CollectiveKind::AllGather), 2);
  EXPECT_EQ(traffic.calls(CollectiveKind::Broadcast), 1);
  EXPECT_EQ(traffic.calls(CollectiveKind::Barrier), 1);
  const RingVolume all_reduce = ring_volume(CollectiveKind::AllReduce, kElems, 4, 0, 1);
  EXPECT_EQ(traffic.sent_bytes(CollectiveKind::AllReduce), 3 * all_reduce.sent_bytes);
  EXPECT_EQ(traffic.recv_bytes(CollectiveKind::AllReduce), 3 * all_reduce.recv_bytes);
  EXPECT_EQ(traffic.sent_bytes(), 0);
  EXPECT_EQ(traffic.recv_bytes(), 0);
}

// ZL_COLLECTIVE_CHECKS=1: each call is first compared across the ranks (one rank always agrees),
// the data and the traffic ledger are as without it, and only the check's words join CommBuffer.
TEST(GpuNcclChecks, CheckedCallsKeepTheirDataAndTraffic) {
  ZL_REQUIRE_GPU();
  ScopedEnv env;
  env.set("ZL_COLLECTIVE_CHECKS", "1");
  CudaDevice device(0);
  NcclBootstrap bootstrap;
  bootstrap.rank = {0, 1, 0};
  ASSERT_EQ(nccl().GetUniqueId(&bootstrap.id), ncclSuccess);
  const std::int64_t before = device.ledger().current_bytes(MemCategory::CommBuffer);
  NcclComm comm(device, bootstrap);
  constexpr std::size_t kElems = 333;
  const auto values = test::random_floats(kElems, 52);
  Buffer data = test::upload(device, values);
  comm.all_reduce(data.data(), kElems, DType::F32, ReduceOp::Sum);
  comm.broadcast(data.data(), kElems, DType::F32, 0);
  comm.barrier();
  test::expect_same_bits(test::download(device, data), values, "checked all_reduce");
  EXPECT_EQ(comm.traffic().calls(CollectiveKind::AllReduce), 1);
  EXPECT_EQ(comm.traffic().calls(CollectiveKind::Barrier), 1);
  // The barrier word (4 bytes) and the check's 2 * 5 int64 words.
  EXPECT_EQ(device.ledger().current_bytes(MemCategory::CommBuffer) - before, 4 + 80);
}

TEST_F(GpuNcclTest, HostBuffersAreStagedThroughTheDevice) {
  // The engines' small host collectives: the loss (one float) and the norm's fp64 partials.
  float loss = 2.5f;
  comm_->all_reduce(&loss, 1, DType::F32, ReduceOp::Avg);
  EXPECT_EQ(loss, 2.5f);
  const std::vector<double> partials = {1.0, 0.25, 1e-300};
  std::vector<double> gathered(partials.size());
  comm_->all_gather_async(partials.data(), gathered.data(), partials.size(), DType::F64).wait();
  EXPECT_EQ(gathered, partials);
  // Host on one side, device on the other, both ways.
  constexpr std::size_t kElems = 257;
  const auto values = test::random_floats(kElems, 52);
  Buffer on_device = device_->alloc(MemCategory::CommBuffer, DType::F32, {kElems});
  comm_->reduce_scatter(values.data(), on_device.data(), kElems, DType::F32, ReduceOp::Sum);
  test::expect_same_bits(test::download(*device_, on_device), values, "host -> device");
  std::vector<float> back(kElems);
  comm_->all_gather(on_device.data(), back.data(), kElems, DType::F32);
  test::expect_same_bits(back, values, "device -> host");
  EXPECT_EQ(comm_->traffic().calls(CollectiveKind::AllGather), 2);
}

// A collective on device memory only queues, blocking or waited: the host is not held (the
// compute stream is, by a host function, for 500 ms), and a read through the device afterwards
// sees every call's result, its wait ordered after them.
TEST_F(GpuNcclTest, CollectivesOnDeviceMemoryOnlyQueue) {
  constexpr std::size_t kElems = 64;
  const auto values = test::random_floats(kElems, 53);
  Buffer data = test::upload(*device_, values);
  Buffer gathered = device_->alloc(MemCategory::Gathered, DType::F32, {kElems});
  const std::int64_t waits_before = device_->host_waits();
  const auto start = std::chrono::steady_clock::now();
  ZL_CUDA_CHECK(cudaLaunchHostFunc(
      device_->stream(),
      [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(500)); }, nullptr));
  for (int i = 0; i < 4; ++i) comm_->all_reduce(data.data(), kElems, DType::F32, ReduceOp::Sum);
  comm_->all_gather_async(data.data(), gathered.data(), kElems, DType::F32).wait();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(250));
  EXPECT_EQ(device_->host_waits(), waits_before);
  test::expect_same_bits(test::download(*device_, gathered), values, "all_gather after the hold");
  EXPECT_GE(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(500));
  EXPECT_EQ(device_->host_waits(), waits_before + 1);
}

// The watchdog (nccl_watchdog.cpp): a collective that cannot complete within the collective
// timeout (the compute stream it is ordered after is held by a host function for 2 s) ends with
// the sim's timeout message at the next host wait on the device (the call itself only queues),
// the communicator is aborted, and every later call fails. The wait returns when the host
// function lets go, not at the timeout: ncclCommAbort waits for the stream to pass it (2.006 s on
// an H200, 2026-11-26). A rank stuck inside an NCCL kernel, the case the
// watchdog is for, is what the abort ends; one GPU cannot hold the two ranks that would show it.
TEST(GpuNcclWatchdog, ACollectivePastTheTimeoutAbortsTheCommunicator) {
  ZL_REQUIRE_GPU();
  CudaDevice device(0);
  NcclBootstrap bootstrap;
  bootstrap.rank = {0, 1, 0};
  ASSERT_EQ(nccl().GetUniqueId(&bootstrap.id), ncclSuccess);
  NcclComm comm(device, bootstrap, std::chrono::milliseconds(200));
  Buffer data = device.alloc(MemCategory::CommBuffer, DType::F32, {4});
  comm.all_reduce(data.data(), 4, DType::F32, ReduceOp::Sum);  // a healthy call passes the watch
  ZL_CUDA_CHECK(cudaLaunchHostFunc(
      device.stream(), [](void*) { std::this_thread::sleep_for(std::chrono::seconds(2)); },
      nullptr));
  const std::string error = error_of([&] {
    comm.all_reduce(data.data(), 4, DType::F32, ReduceOp::Sum);
    device.synchronize();
  });
  EXPECT_EQ(error,
            "timeout after 200 ms: rank 0 waits in call #2 all_reduce(fp32, 4 elems, sum); not "
            "every rank completed it (a rank stuck, gone or in another call): its communicator "
            "was aborted");
  EXPECT_NE(error_of([&] {
              comm.barrier();
            }).find("the NCCL communicator was aborted (rank 0 gave up in call #2 all_reduce"),
            std::string::npos);
}

TEST_F(GpuNcclTest, ReductionOverInt64IsRefused) {
  Buffer data = device_->alloc(MemCategory::CommBuffer, DType::I64, {4});
  EXPECT_NE(error_of([&] {
              comm_->all_reduce(data.data(), 4, DType::I64, ReduceOp::Sum);
            }).find("all_reduce over int64 is not supported"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              comm_->broadcast(data.data(), 4, DType::I64, 1);
            }).find("broadcast root 1 is out of range for world size 1"),
            std::string::npos);
}

}  // namespace
}  // namespace zl
