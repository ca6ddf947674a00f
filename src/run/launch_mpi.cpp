// launch_mpi.cpp — the mpi backend: this process runs its rank on an MpiComm and the CPU. The
// per-rank reports and checkpoint file entries travel to rank 0's process out of band (not in the
// traffic ledger), so the ledgers are the sim's. A rank that fails aborts the job with its
// message; a non-finite norm stops every rank at the same step and rank 0 reports it.
#include "run/launch.hpp"
#ifdef ZL_HAVE_MPI
#include "comm/mpi/mpi_comm.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "run/rank_reports.hpp"
#endif

namespace zl {

#ifdef ZL_HAVE_MPI
void launch_on_mpi(const RunPlan& plan, const RankCallbacks& callbacks, TrainResult& result) {
  const TrainConfig& config = plan.config;
  MpiComm comm(config.mpi_reduce, plan.timeline.options);
  ZL_CHECK(comm.size() == config.world,
           "--world {} does not match the {} processes mpirun started: drop --world or run "
           "mpirun -np {}",
           config.world, comm.size(), config.world);
  const ShareFile share_file = [&comm](Comm&, FileEntry entry) {
    std::vector<FileEntry> files;
    for (const auto& bytes : comm.gather_to_root(encode_file_entry(entry))) {
      files.push_back(decode_file_entry(bytes));
    }
    comm.barrier();
    return files;
  };
  RankRun run;
  try {
    CpuDevice device;
    run = run_rank(plan, comm, device, comm.timeline(), share_file, callbacks);
  } catch (const std::exception& e) {
    mpi_abort(e.what());
  }
  finish_process_run(result, run, comm.rank() == 0,
                     [&comm](const std::string& bytes) { return comm.gather_to_root(bytes); });
}
#else
void launch_on_mpi(const RunPlan&, const RankCallbacks&, TrainResult&) {
  fail("{}", kNoMpi);
}
#endif

}  // namespace zl
