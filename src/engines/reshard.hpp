// reshard.hpp — a ShardState recut from one partition of the units to another, through all_gathers
// of host copies: how hybrid sharding (shards of a node's G ranks) writes ZeRO-3's checkpoints
// (shards of the world's W) and reads them back. Only bits are copied, so the recut state is
// exactly the elements it covers.
#pragma once

#include <vector>

#include "comm/comm.hpp"
#include "engines/engine.hpp"
#include "engines/partition.hpp"

namespace zl {

/// `state` holds this rank's shards under `from`, a layout for comm.size() ranks whose other
/// shards the ranks of `comm` hold (rank r of `comm` shard r). Returns shard `to_rank` of the
/// layout `to` (the same units laid out for another number of ranks): each unit's parameters
/// and moments are gathered whole over `comm`, one unit at a time, and the new shard's real
/// elements copied out, its padding zero. The update count and the loss scaler are kept.
/// Collective over `comm`.
ShardState reshard_state(Comm& comm, const ShardState& state, const std::vector<UnitLayout>& from,
                         const std::vector<UnitLayout>& to, int to_rank);

}  // namespace zl
