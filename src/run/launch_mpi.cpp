// launch_mpi.cpp — the mpi backend: this process runs its rank on an MpiComm and the CPU. The
// per-rank reports and checkpoint file entries travel to rank 0's process out of band (not in the
// traffic ledger), so the ledgers are the sim's. A rank that fails aborts the job with its
// message; a non-finite norm stops every rank at the same step and rank 0 reports it. Before the
// first step rank 0 compares every process's run (run_fingerprint.hpp) and ends the job, naming
// the first field that differs, when one was started with other flags; then every process takes
// rank 0's run id, so all ranks' checkpoint files name the same run.
#include "run/launch.hpp"
#ifdef ZL_HAVE_MPI
#include "comm/mpi/mpi_comm.hpp"
#include "ops/cpu/cpu_device.hpp"
#include "run/rank_reports.hpp"
#include "run/run_fingerprint.hpp"
#endif

namespace zl {

#ifdef ZL_HAVE_MPI
void launch_on_mpi(RunPlan& plan, const RankCallbacks& callbacks, TrainResult& result) {
  const TrainConfig& config = plan.config;
  MpiComm comm(config.mpi_reduce, plan.timeline.options, config.collective_timeout,
               config.gpus_per_node);
  ZL_CHECK(comm.size() == config.world,
           "--world {} does not match the {} processes mpirun started: drop --world or run "
           "mpirun -np {}",
           config.world, comm.size(), config.world);
  // Every process must run the same run: rank 0 compares them all before the first step and
  // every rank fails with its verdict, in order (rank 0's process prints it); else every rank
  // takes rank 0's run id.
  const std::vector<std::string> fingerprints =
      comm.gather_to_root(encode_fingerprint(run_fingerprint(plan)));
  plan.run_id = agreed_run_id(
      comm.broadcast_from_root(comm.rank() == 0 ? settle_run(fingerprints, plan.run_id) : ""));
  const ShareFile share_file = [&comm](Comm&, RankFile file) {
    std::vector<RankFile> files;
    for (const auto& bytes : comm.gather_to_root(encode_rank_file(file))) {
      files.push_back(decode_rank_file(bytes));
    }
    comm.barrier();
    return files;
  };
  RankRun run;
  try {
    CpuDevice device(run_threads(plan.config), plan.config.kernel_grain);
    run = run_rank(plan, comm, device, comm.timeline(), share_file, callbacks);
  } catch (const std::exception& e) {
    mpi_abort(e.what());
  }
  finish_process_run(result, run, comm.rank() == 0,
                     [&comm](const std::string& bytes) { return comm.gather_to_root(bytes); });
}
#else
void launch_on_mpi(RunPlan&, const RankCallbacks&, TrainResult&) {
  fail("{}", kNoMpi);
}
#endif

}  // namespace zl
