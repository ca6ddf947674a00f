// train.cpp — one training job: plan it, then run it in the reference process or launch its ranks
// on the sim, mpi or nccl backend. Every backend runs the same per-rank loop (rank_loop.cpp); only
// how the ranks are started and how their reports reach the caller differ (launch_*.cpp).
#include "run/train.hpp"

#include "run/launch.hpp"
#include "run/rank_loop.hpp"
#include "run/run_plan.hpp"

namespace zl {

TrainResult train(const TrainConfig& config, const StepCallback& on_step,
                  const RankObserver& observer, const CheckpointPlan& checkpoints,
                  const std::vector<OutputFile>& outputs) {
  TrainResult result;
  RunPlan plan = plan_run(config, checkpoints, result.data);
  plan.outputs = outputs;
  result.compute_scale = plan.timeline.options.compute_scale;
  result.cpu_gflops = plan.timeline.cpu_gflops;
  const RankCallbacks callbacks{.on_step = on_step, .observer = observer, .steps = result.steps};
  if (config.engine == EngineKind::Reference) {
    run_reference(plan, callbacks, result);
  } else if (config.backend == Backend::Mpi) {
    launch_on_mpi(plan, callbacks, result);
  } else if (config.backend == Backend::Nccl) {
    launch_on_nccl(plan, callbacks, result);
  } else {
    launch_on_sim(plan, callbacks, result);
  }
  return result;
}

}  // namespace zl
