// reshard.cpp — recutting a ShardState from one partition to another by gathering each unit.
#include "engines/reshard.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace zl {

namespace {

// Shard `rank` of `to` from the whole unit `shards` (comm.size() shards of `from`, gathered).
std::vector<float> recut(Comm& comm, const std::vector<float>& own, const UnitLayout& from,
                         const UnitLayout& to, int to_rank) {
  ZL_CHECK(static_cast<std::int64_t>(own.size()) == from.shard_elems,
           "reshard {}: a shard of {} elements, expected {}", from.name, own.size(),
           from.shard_elems);
  std::vector<float> whole(static_cast<std::size_t>(from.shard_elems * comm.size()));
  comm.all_gather(own.data(), whole.data(), own.size(), DType::F32);
  std::vector<float> shard(static_cast<std::size_t>(to.shard_elems), 0.0f);
  const std::int64_t begin = to_rank * to.shard_elems;
  const std::int64_t real = std::clamp<std::int64_t>(to.numel - begin, 0, to.shard_elems);
  std::copy_n(whole.begin() + begin, real, shard.begin());
  return shard;
}

}  // namespace

ShardState reshard_state(Comm& comm, const ShardState& state, const std::vector<UnitLayout>& from,
                         const std::vector<UnitLayout>& to, int to_rank) {
  ZL_CHECK(from.size() == to.size() && state.params.size() == from.size(),
           "reshard: {} units to {}, with {} in the state", from.size(), to.size(),
           state.params.size());
  ShardState out;
  out.adam_updates = state.adam_updates;
  out.scaler = state.scaler;
  for (std::size_t u = 0; u < from.size(); ++u) {
    ZL_CHECK(
        from[u].numel == to[u].numel && from[u].padded_elems == from[u].shard_elems * comm.size(),
        "reshard {}: layouts of {} and {} elements, {} ranks", from[u].name, from[u].numel,
        to[u].numel, comm.size());
    out.params.push_back(recut(comm, state.params[u], from[u], to[u], to_rank));
    out.exp_avg.push_back(recut(comm, state.exp_avg[u], from[u], to[u], to_rank));
    out.exp_avg_sq.push_back(recut(comm, state.exp_avg_sq[u], from[u], to[u], to_rank));
  }
  return out;
}

}  // namespace zl
