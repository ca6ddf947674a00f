// launch_nccl.cpp — the nccl backend: this process runs its rank on its GPU (LOCAL_RANK) through
// an NcclComm, joining the group by MPI under mpirun, by torchrun-style variables, or alone. While
// the ranks bootstrap, rank 0 compares every process's run (run_fingerprint.hpp) over the
// bootstrap's own channel and ends the job, naming the first field that differs, or hands every
// rank its run id. The per-rank reports and checkpoint file entries travel by all_gather_bytes. A
// rank that fails prints its message and exits; the other ranks' next collective then ends at the
// collective timeout, when NcclComm's watchdog aborts the communicator and names the call.
#include "run/launch.hpp"
#ifdef ZL_HAVE_NCCL
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "comm/nccl/nccl_bootstrap.hpp"
#include "comm/nccl/nccl_comm.hpp"
#include "ops/cuda/cuda_device.hpp"
#include "run/memory_check.hpp"
#include "run/rank_reports.hpp"
#include "run/run_fingerprint.hpp"
#ifdef ZL_NCCL_WITH_MPI
#include "comm/nccl/nccl_mpi_bootstrap.hpp"
#endif
#endif

namespace zl {

#ifdef ZL_HAVE_NCCL
namespace {

// How this process joins the NCCL group: by MPI under mpirun, by the torchrun-style variables
// when WORLD_SIZE is above 1, else alone (W = 1, on GPU LOCAL_RANK when it is set). `agreement`
// is settled on the way.
NcclBootstrap nccl_bootstrap(const BootstrapAgreement& agreement) {
#ifdef ZL_NCCL_WITH_MPI
  if (under_mpirun()) return nccl_bootstrap_from_mpi(agreement);
#endif
  ZL_CHECK(!under_mpirun(),
           "--backend nccl under mpirun needs a zerolab built with MPI: install libopenmpi-dev "
           "and rebuild, or launch with RANK, WORLD_SIZE and LOCAL_RANK set");
  if (std::getenv("WORLD_SIZE") == nullptr) return nccl_bootstrap_single(agreement);
  const NcclRankInfo info = nccl_rank_from_env();
  if (info.world > 1) return nccl_bootstrap_from_env(agreement);
  NcclBootstrap alone = nccl_bootstrap_single(agreement);  // WORLD_SIZE=1 needs no id exchange
  alone.rank = info;
  return alone;
}

// Every rank's `bytes`, rank order, over `comm`: their sizes, then the bytes padded to the
// longest, in 8-byte words (host buffers: NcclComm stages them through the device). Counted in
// the rank's traffic ledger like any collective. Collective.
std::vector<std::string> all_gather_bytes(Comm& comm, const std::string& bytes) {
  const auto world = static_cast<std::size_t>(comm.size());
  std::vector<std::int64_t> sizes(world);
  auto own_size = static_cast<std::int64_t>(bytes.size());
  comm.all_gather(&own_size, sizes.data(), 1, DType::I64);
  const std::int64_t words = (*std::ranges::max_element(sizes) + 7) / 8;
  std::vector<std::int64_t> send(static_cast<std::size_t>(words), 0);
  std::vector<std::int64_t> recv(static_cast<std::size_t>(words) * world);
  std::memcpy(send.data(), bytes.data(), bytes.size());
  comm.all_gather(send.data(), recv.data(), static_cast<std::size_t>(words), DType::I64);
  std::vector<std::string> all;
  for (std::size_t r = 0; r < world; ++r) {
    const auto* first =
        reinterpret_cast<const char*>(recv.data() + r * static_cast<std::size_t>(words));
    all.emplace_back(first, static_cast<std::size_t>(sizes[r]));
  }
  return all;
}

}  // namespace

void launch_on_nccl(RunPlan& plan, const RankCallbacks& callbacks, TrainResult& result) {
  const TrainConfig& config = plan.config;
  const NcclBootstrap bootstrap =
      nccl_bootstrap({.payload = encode_fingerprint(run_fingerprint(plan)),
                      .settle = [&plan](const std::vector<std::string>& fingerprints) {
                        return settle_run(fingerprints, plan.run_id);
                      }});
  plan.run_id = agreed_run_id(bootstrap.settled);
  ZL_CHECK(bootstrap.rank.world == config.world,
           "--world {} does not match the {} processes launched: drop --world or launch {}",
           config.world, bootstrap.rank.world, config.world);
  if (config.check_memory) {
    with_error_kind(ErrorKind::Usage,
                    [&] { check_gpu_memory(config, bootstrap.rank.local_rank); });
  }
  std::unique_ptr<Device> device =
      make_rank_device(Accelerator::Cuda, bootstrap.rank.local_rank, config.features.precision, 1,
                       cpu::Grain::Normal, config.attention);
  NcclComm comm(static_cast<CudaDevice&>(*device), bootstrap, config.collective_timeout,
                config.gpus_per_node);
  RankTimeline clocks(config.world, plan.timeline.options);
  clocks.start();
  const ShareFile share_file = [](Comm& own, RankFile file) {
    std::vector<RankFile> files;
    for (const auto& bytes : all_gather_bytes(own, encode_rank_file(file))) {
      files.push_back(decode_rank_file(bytes));
    }
    return files;
  };
  RankRun run = run_rank(plan, comm, *device, clocks, share_file, callbacks);
  finish_process_run(result, run, comm.rank() == 0,
                     [&comm](const std::string& bytes) { return all_gather_bytes(comm, bytes); });
}
#else
void launch_on_nccl(RunPlan&, const RankCallbacks&, TrainResult&) {
  fail("{}", kNoNccl);
}
#endif

}  // namespace zl
