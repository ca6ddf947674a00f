// what_if.hpp — `zerolab train --what-if-world N`: what the same training would cost on N ranks,
// predicted from the run just measured (docs/timeline.md, "What-if"):
//   compute  each rank's recorded compute spans as measured (data parallel: the same micro-batch
//            per rank at any N), but the optimizer update of a sharded stage (ZeRO-1/2/3) scaled
//            by W/N, since each rank updates 1/N of the model;
//   copies   offload's host copies on the same host link; a sharded stage's copy the own shard,
//            so its bytes scale by W/N too (rounded down: about, as a shard is padded);
//   comm     the same call sequence, each call's buffer re-derived for N and re-costed on the
//            link: a reduce_scatter or all_gather of whole units (a multiple of W * 64 elements)
//            padded to a multiple of N * 64 instead, as layout_units pads a unit (exact when N is
//            a multiple of W, else at most N * 64 elements more per call); other buffers (bucket
//            pieces, the norm's partials, all_reduce, broadcast) keep their size. Groups of ranks
//            (hybrid sharding, hpZ) keep their ranks, but hybrid sharding's replicas across the
//            nodes, which span all N/G nodes; its units stay laid out for a node's G ranks;
//   overlap  the recorded programs replayed on the timeline's clocks with those costs;
//   memory   model states from the estimator (estimate_ledger at N), everything else (activations,
//            gathered units, comm buffers) as measured.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run/train.hpp"

namespace zl {

/// One world's per-step figures: the mean over the run's steps, the largest over the ranks.
struct WorldFigures {
  int world = 1;                 ///< ranks these figures are for
  double step_ms = 0.0;          ///< simulated
  double compute_ms = 0.0;       ///< simulated time on the compute stream
  double comm_ms = 0.0;          ///< simulated time on the comm stream, alpha-beta priced
  double exposed_comm_ms = 0.0;  ///< comm time not hidden behind compute
  double copy_ms = 0.0;          ///< simulated time of the host copies (offload), on the host link
  std::int64_t sent_bytes = 0;         ///< per step, rank 0, ring volumes
  std::int64_t model_state_bytes = 0;  ///< per rank: params + grads + master + optimizer
  std::int64_t peak_bytes = 0;         ///< per rank
};

/// The measured world beside the predicted one.
struct WhatIf {
  WorldFigures measured;   ///< the run as recorded, at its own world
  WorldFigures predicted;  ///< the same program replayed at the asked world
  std::string engine;      ///< "ddp", "zero1", "zero2" or "zero3"
  std::string link;        ///< the link preset that prices the collectives, e.g. "h100-nvlink"
  std::string device;      ///< the device preset that scales compute, or "cpu" (measured as is)
};

/// How a program recorded on one world maps onto another.
struct WorldScaling {
  int from_world = 1;            ///< the measured ranks
  int to_world = 1;              ///< the predicted ranks
  int gpus_per_node = kOneNode;  ///< ranks a node, in both (kOneNode: each world is one node)
  /// The ranks the units are padded and sharded for, measured and predicted: the world, or for
  /// hybrid sharding a node's ranks in both.
  int layout_from = 1;
  int layout_to = 1;  ///< see layout_from
  /// The update and its host copies work on one shard of layout_from (ZeRO-1/2/3, hpZ, HSDP).
  bool sharded_update = false;
  /// Groups with one rank on every node are replicas across the nodes (hybrid sharding), which
  /// have one rank on every node of the predicted world; every other group keeps its ranks.
  bool replicas_across_nodes = false;
};

/// `program` (recorded on rank `rank` of scaling.from_world) as it would run on
/// scaling.to_world ranks: each Issue's buffer re-derived for layout_to, its group resized and
/// its bytes recounted; with sharded_update every "update" compute span and every host copy's
/// bytes scaled by layout_from / layout_to. The same program at to_world == from_world.
std::vector<TimelineOp> program_for_world(const std::vector<TimelineOp>& program, int rank,
                                          const WorldScaling& scaling);

/// Predicts `config`'s training on `world` ranks from `result`, which must come from a
/// distributed engine run with config.record_timeline. Throws zl::Error otherwise or if
/// world < 1.
WhatIf predict_world(const TrainConfig& config, const TrainResult& result, int world);

/// The table `zerolab train --what-if-world` prints.
std::string format_what_if(const WhatIf& what_if);

/// {"engine", "link", "device", "measured": {...}, "predicted": {...}} with the WorldFigures keys
/// (world, step_ms, compute_ms, comm_ms, exposed_comm_ms, copy_ms, sent_bytes, model_state_bytes,
/// peak_bytes).
nlohmann::json what_if_json(const WhatIf& what_if);

}  // namespace zl
