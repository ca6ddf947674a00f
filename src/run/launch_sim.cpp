// launch_sim.cpp — the sim backend: W threads of this process, one SimComm each, meeting at the
// simulator's rendezvous; rank 0's thread hands back the state, every thread its ledgers.
#include <memory>

#include "run/launch.hpp"
#include "sim_comm.hpp"
#include "sim_world.hpp"

namespace zl {

void launch_on_sim(const RunPlan& plan, const RankCallbacks& callbacks, TrainResult& result) {
  const TrainConfig& config = plan.config;
  SimWorld world(config.world, SimOptions{.timeout = config.collective_timeout,
                                          .faults = config.faults,
                                          .timeline = plan.timeline.options,
                                          .gpus_per_node = config.gpus_per_node});
  result.ranks.resize(static_cast<std::size_t>(config.world));
  std::vector<RankFile> saved(static_cast<std::size_t>(config.world));  // one slot per rank
  const ShareFile share_file = [&saved](Comm& own, RankFile file) {
    saved[static_cast<std::size_t>(own.rank())] = std::move(file);
    own.barrier();
    return saved;
  };
  std::string stopped;  // rank 0's NonFiniteError: every rank stops at the same step
  world.run([&](Comm& comm) {
    // Every rank of the sim shares GPU 0 (the simulator's collectives run on one GPU's memory).
    const std::unique_ptr<Device> device =
        make_rank_device(config.accelerator, 0, config.features.precision, run_threads(config),
                         config.kernel_grain, config.attention);
    RankRun run = run_rank(plan, comm, *device, *sim_timeline(comm), share_file, callbacks);
    if (comm.rank() != 0) {
      if (run.stopped.empty()) result.ranks[static_cast<std::size_t>(comm.rank())] = run.report;
      return;
    }
    stopped = run.stopped;
    if (!stopped.empty()) return;
    result.ranks[0] = run.report;
    result.layout = std::move(run.layout);
    result.final_state = std::move(run.state);
  });
  if (!stopped.empty()) throw Error(stopped);
  for (int r = 0; r < config.world; ++r) result.timelines.push_back(world.timeline(r));
}

}  // namespace zl
