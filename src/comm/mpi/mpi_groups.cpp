// mpi_groups.cpp — MpiComm's groups and its all_to_all: split() all-gathers the colors through
// the world's agreed, timed-out call (so every rank is known to be there before MPI_Comm_split,
// which waits without a timeout) and makes the group's MpiComm, which counts its calls in the
// world's ledger and on the world's timeline, priced for its ranks and the nodes they span.
#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "comm/mpi/mpi_comm.hpp"
#include "comm/reduce.hpp"
#include "core/error.hpp"

namespace zl {

MpiComm::MpiComm(MpiComm& parent, MPI_Comm group, std::vector<int> world_ranks)
    : mode_(parent.mode_),
      comm_(group),
      world_gpus_per_node_(parent.world_gpus_per_node_),
      world_ranks_(std::move(world_ranks)),
      calls_(parent.calls_),
      timeout_(parent.timeout_),
      timeline_(parent.timeline_) {
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &world_);
  group_nodes_ = nodes_spanned(world_ranks_, world_gpus_per_node_);
  group_leader_ = *std::min_element(world_ranks_.begin(), world_ranks_.end());
  level_ = link_level_of(world_, group_nodes_);
  count_in(parent);
  create_user_ops();
}

std::unique_ptr<Comm> MpiComm::split(int color) {
  ZL_CHECK(color >= 0, "split color {} is invalid: MPI takes colors of 0 or more", color);
  std::vector<int> members = split_members(color, world_ranks_);
  MPI_Comm group = MPI_COMM_NULL;
  ZL_CHECK(MPI_Comm_split(comm_, color, rank_, &group) == MPI_SUCCESS,
           "MPI_Comm_split of rank {} into the group of color {} failed", rank_, color);
  return std::unique_ptr<Comm>(new MpiComm(*this, group, std::move(members)));
}

void MpiComm::all_to_all(const void* send, void* recv, std::size_t count, DType dtype) {
  const CallDesc call{
      .kind = CollectiveKind::AllToAll, .dtype = dtype, .count = count, .send = send, .recv = recv};
  run_call(call, [&] {
    ZL_CHECK(count <= static_cast<std::size_t>(INT_MAX),
             "{} is too large for one MPI call ({} elems a block at most)", describe(call),
             INT_MAX);
    MPI_Request request = MPI_REQUEST_NULL;
    MPI_Ialltoall(send, static_cast<int>(count), mpi_datatype(dtype), recv, static_cast<int>(count),
                  mpi_datatype(dtype), comm_, &request);
    wait_or_abort(request);
  });
}

}  // namespace zl
