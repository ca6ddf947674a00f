// launch_process.cpp — what the backends with one rank per process (mpi, nccl) share: how many
// ranks were launched, and how the ranks' reports reach rank 0's process at the end.
#include <charconv>
#include <cstdlib>
#include <string_view>

#include "core/error.hpp"
#include "run/launch.hpp"
#include "run/rank_reports.hpp"
#ifdef ZL_HAVE_MPI
#include "comm/mpi/mpi_comm.hpp"
#endif
#ifdef ZL_HAVE_NCCL
#include "comm/nccl/nccl_bootstrap.hpp"
#endif

namespace zl {

bool under_mpirun() {
  return std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr;
}

std::optional<int> launched_gpus_per_node(Backend backend) {
  if (backend == Backend::Sim) return std::nullopt;
  const char* const name = under_mpirun() ? "OMPI_COMM_WORLD_LOCAL_SIZE" : "LOCAL_WORLD_SIZE";
  const char* const value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  int ranks = 0;
  const std::string_view text(value);
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), ranks);
  ZL_CHECK(error == std::errc() && end == text.data() + text.size() && ranks >= 1,
           "environment variable {}={} is not a number of ranks on this node: launch with mpirun "
           "or torchrun, or pass --gpus-per-node",
           name, text);
  return ranks;
}

std::optional<int> launched_world(Backend backend) {
  if (backend == Backend::Sim) return std::nullopt;
  if (backend == Backend::Nccl) {
#ifdef ZL_HAVE_NCCL
    if (under_mpirun()) return std::atoi(std::getenv("OMPI_COMM_WORLD_SIZE"));
    if (std::getenv("WORLD_SIZE") != nullptr) return nccl_rank_from_env().world;
    return 1;
#else
    fail("{}", kNoNccl);
#endif
  }
#ifdef ZL_HAVE_MPI
  return mpi_world_size();
#else
  fail("{}", kNoMpi);
#endif
}

void finish_process_run(TrainResult& result, RankRun& run, bool is_rank0,
                        const GatherBytes& gather) {
  if (!run.stopped.empty() && is_rank0) throw Error(run.stopped);
  TrainResult elsewhere;  // what the other ranks' processes return
  elsewhere.has_results = false;
  if (!run.stopped.empty()) {
    result = std::move(elsewhere);
    return;
  }
  const std::vector<std::string> totals =
      gather(encode_rank_totals({.report = run.report, .steps = run.step_times}));
  if (!is_rank0) {
    result = std::move(elsewhere);
    return;
  }
  for (const auto& bytes : totals) {
    RankTotals rank = decode_rank_totals(bytes);
    TimelineRecord timeline_record;
    timeline_record.rank = rank.report.rank;
    timeline_record.steps = std::move(rank.steps);
    result.timelines.push_back(std::move(timeline_record));
    result.ranks.push_back(std::move(rank.report));
  }
  result.layout = std::move(run.layout);
  result.final_state = std::move(run.state);
}

}  // namespace zl
