// comm.cpp — what the Comm interface itself does: split() and all_to_all() where a backend has
// neither.
#include "comm/comm.hpp"

#include "core/error.hpp"

namespace zl {

std::unique_ptr<Comm> Comm::split(int color) {
  static_cast<void>(color);
  fail("this backend cannot split its ranks into groups: use --backend sim or mpi");
}

std::vector<int> Comm::split_members(int color, const std::vector<int>& world_ranks,
                                     int* rank_in_group) {
  const std::int64_t own_color = color;
  std::vector<std::int64_t> colors(static_cast<std::size_t>(size()));
  all_gather(&own_color, colors.data(), 1, DType::I64);
  std::vector<int> members;
  for (int r = 0; r < size(); ++r) {
    if (colors[static_cast<std::size_t>(r)] != own_color) continue;
    if (r == rank() && rank_in_group != nullptr) {
      *rank_in_group = static_cast<int>(members.size());
    }
    members.push_back(world_ranks.empty() ? r : world_ranks[static_cast<std::size_t>(r)]);
  }
  return members;
}

void Comm::all_to_all(const void* send, void* recv, std::size_t count, DType dtype) {
  static_cast<void>(send);
  static_cast<void>(recv);
  fail("this backend has no all_to_all of {} {} elems: use --backend sim or mpi", count,
       dtype_name(dtype));
}

}  // namespace zl
