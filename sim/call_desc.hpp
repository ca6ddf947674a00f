// call_desc.hpp — one rank's collective call as posted at the rendezvous: what was asked for,
// how it reads in error messages, and whether two ranks' calls agree.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "comm/comm.hpp"
#include "comm/reduce.hpp"
#include "comm/traffic_ledger.hpp"
#include "core/dtype.hpp"

namespace zl {

/// One rank's collective call. Fields a kind does not use keep their defaults and are ignored
/// when calls are compared.
struct CallDesc {
  /// 1-based position of the call in its rank's sequence; the rendezvous key.
  std::int64_t call_number = 0;
  /// Which collective; decides which of the fields below are compared.
  CollectiveKind kind = CollectiveKind::Barrier;
  /// all_reduce and reduce_scatter only.
  ReduceOp op = ReduceOp::Sum;
  /// Element type of both buffers; every kind but barrier compares it.
  DType dtype = DType::F32;
  /// The count argument as passed: the buffer for all_reduce and broadcast, `recv_count` for
  /// reduce_scatter, `send_count` for all_gather, the elements a block for all_to_all.
  std::size_t count = 0;
  /// broadcast only.
  int root = 0;
  /// Input buffer (all_reduce and broadcast: the same as `recv`, they work in place).
  const void* send = nullptr;
  /// Output buffer.
  void* recv = nullptr;
  /// GPUs a node of the world the call runs in (comm/reduce.hpp's kOneNode: one node): a
  /// reduction sums each node's ranks, then the nodes. Set by the rendezvous, not compared.
  int gpus_per_node = kOneNode;
};

/// True for the kinds that reduce (all_reduce, reduce_scatter).
bool is_reduction(CollectiveKind kind);

/// "all_reduce(fp32, 100 elems, sum)", "all_gather(fp32, 25 elems)",
/// "broadcast(fp32, 8 elems, root 0)" or "barrier".
std::string describe(const CallDesc& call);

/// True when two ranks' calls agree on everything that must match: kind, reduce op, dtype,
/// count and root (each only where the kind uses it).
bool same_signature(const CallDesc& a, const CallDesc& b);

/// This rank's own argument errors, thrown before the call meets the other ranks: a reduction
/// over int64, a null buffer in a non-empty call, a broadcast root outside 0..world-1. The sim and
/// mpi backends both check with it, so their messages are the same.
void check_call_arguments(const CallDesc& call, int world);

/// Elements of the whole buffer the ring moves, the `elems` of ring_volume(): the reduce_scatter
/// input, the all_gather output and either all_to_all buffer are `world` blocks of `count`.
std::int64_t ring_buffer_elems(const CallDesc& call, int world);

}  // namespace zl
