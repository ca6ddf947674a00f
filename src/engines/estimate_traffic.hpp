// estimate_traffic.hpp — the bytes one rank sends per optimizer step at each stage, by the links
// they cross (inside a node, across the nodes, or a ring spanning both), in closed form: the ring
// volumes of every collective the engine makes, counted over the model's units padded as the
// engine pads them (comm/traffic_ledger.hpp's ring_volume). It is what the traffic ledger of a
// run records per step, byte for byte, with the default buckets and no prefetch (the ring of a
// reduce_scatter or all_gather moves the same bytes however it is bucketed; an all_reduce cut in
// buckets rounds each piece). Per stage, as `zerolab train` runs it:
//   0  DDP: each unit's gradient all_reduce, every micro-batch, over the world
//   1, 2  ZeRO-1/2: each unit's gradient reduce_scatter every micro-batch, the norm's all_gather of
//         tree sums and the parameters' all_gather once a step; with a shard group (hybrid
//         sharding) the reduce is the node's reduce_scatter and an fp32 all_reduce of the shard
//         across the nodes, and the rest stays inside the node
//   3  ZeRO-3: two all_gathers a visit and a reduce_scatter each micro-batch (persistent units:
//      the reduce_scatter, and one all_gather a step); HSDP inside a node as 1-2's shard group;
//      ZeRO++: hpZ's backward gathers inside the partition, qwZ's int8 gathers, qgZ's int4
//      all_to_alls inside the node and then across
// and for every stage the logged loss's all_reduce of one fp32 value over the world. The group
// splits a run makes once at its start (Comm::split's all_gather of colors) are not per step.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "comm/traffic_ledger.hpp"
#include "engines/engine.hpp"
#include "model/model.hpp"

namespace zl {

/// One collective's share of a step: what it moves, where, and how many bytes this rank sends.
struct TrafficTerm {
  std::string what;                                 ///< "gradients", "parameters, forward", ...
  CollectiveKind kind = CollectiveKind::AllReduce;  ///< the collective
  LinkLevel level = LinkLevel::Inside;              ///< the links its bytes cross
  int group_ranks = 1;                              ///< the ranks it runs among
  std::int64_t sent_bytes = 0;                      ///< per optimizer step, by this rank
  /// The bytes in symbols: "2 · (N-1)/N · 2Ψp" (the micro-batches, then the ring over N ranks of
  /// G a node in M nodes, K for hpZ's partition, times the dtype's bytes of Ψp, the group's padded
  /// elements; Ψf counts a unit once a forward visit, Ψw the units ZeRO-3 keeps whole).
  std::string formula;
};

/// One stage's traffic per optimizer step for one rank.
struct TrafficEstimate {
  int stage = 0;                   ///< 0 (DDP) to 3
  std::string engine;              ///< "zero3", "zero3 hsdp, shard groups of 4", ...
  std::vector<TrafficTerm> terms;  ///< in the order the step makes them
  /// Bytes sent over links of `level`: the traffic ledger's sent_bytes(level) per step.
  std::int64_t sent_bytes(LinkLevel level) const;
  /// Bytes sent over every link: the ledger's sent_bytes() per step.
  std::int64_t sent_bytes() const;
};

/// What the traffic estimate is for: the world and its nodes, and the engines' features.
struct TrafficWorld {
  int world = 1;          ///< N, the ranks
  int gpus_per_node = 0;  ///< G; 0: every rank on one node
  /// The units' forward order (GPT-2's wte runs twice, the second time as the LM head); empty:
  /// each unit once, in order.
  std::vector<int> forward_order;
};

/// Rank `rank`'s bytes sent per optimizer step at `stage` (0..3), training `units` with
/// `features` (precision, grad_accum_steps, persistence, shard_group_ranks, hpz_partition_ranks,
/// quantized_weights and quantized_gradients, reduce_bucket_elems) as `zerolab train` would at
/// that stage: the shard group applies to stages 1-3, ZeRO++'s features to stage 3 only.
/// Throws zl::Error when the world and features do not make an engine (validate_shard_group,
/// validate_zeropp) or G does not divide W.
TrafficEstimate estimate_traffic(const std::vector<UnitSpec>& units, const TrafficWorld& world,
                                 const TrainingFeatures& features, int stage, int rank = 0);

}  // namespace zl
