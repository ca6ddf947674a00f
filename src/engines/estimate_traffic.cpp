// estimate_traffic.cpp — each stage's collectives per optimizer step as ring volumes over the
// padded layout, by link level.
#include "engines/estimate_traffic.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "comm/quantize.hpp"
#include "core/error.hpp"
#include "engines/checked_math.hpp"
#include "engines/estimate.hpp"
#include "engines/partition.hpp"
#include "engines/quantized_comm.hpp"
#include "engines/shard_groups.hpp"
#include "engines/step_norm.hpp"
#include "engines/zero3_shards.hpp"

namespace zl {

std::int64_t TrafficEstimate::sent_bytes(LinkLevel level) const {
  std::int64_t bytes = 0;
  for (const TrafficTerm& term : terms) {
    if (term.level == level) bytes += term.sent_bytes;
  }
  return bytes;
}

std::int64_t TrafficEstimate::sent_bytes() const {
  std::int64_t bytes = 0;
  for (const TrafficTerm& term : terms) bytes += term.sent_bytes;
  return bytes;
}

namespace {

// A group of `ranks` ranks that collectives run among, its links and this rank's place in it.
struct Group {
  int ranks = 1;
  int index = 0;  // this rank's rank in the group
  LinkLevel level = LinkLevel::Inside;
  const char* symbol = "N";  // how formulas name its size
};

// What one step moves, added up term by term.
class Step {
 public:
  Step(std::int64_t micro_batches, int training_bytes)
      : micro_batches_(micro_batches), training_bytes_(training_bytes) {}

  // A term made once per micro-batch: its bytes and formula times k.
  void per_micro_batch(std::string what, CollectiveKind kind, const Group& group,
                       std::int64_t bytes, const std::string& formula) {
    add(std::move(what), kind, group, micro_batches_ * bytes,
        micro_batches_ > 1 ? fmt::format("{} · {}", micro_batches_, formula) : formula);
  }
  void per_step(std::string what, CollectiveKind kind, const Group& group, std::int64_t bytes,
                const std::string& formula) {
    add(std::move(what), kind, group, bytes, formula);
  }
  // "(G-1)/G · 2Ψp": a reduce_scatter's or all_gather's ring factor times the training bytes.
  std::string ring(const Group& group, const std::string& elems) const {
    return fmt::format("({0}-1)/{0} · {1}{2}", group.symbol, training_bytes_, elems);
  }
  std::vector<TrafficTerm> take() { return std::move(terms_); }

 private:
  void add(std::string what, CollectiveKind kind, const Group& group, std::int64_t bytes,
           std::string formula) {
    if (group.ranks < 2 || bytes == 0) return;  // a group of one moves nothing, makes no call
    terms_.push_back({.what = std::move(what),
                      .kind = kind,
                      .level = group.level,
                      .group_ranks = group.ranks,
                      .sent_bytes = bytes,
                      .formula = std::move(formula)});
  }
  std::int64_t micro_batches_;
  int training_bytes_;
  std::vector<TrafficTerm> terms_;
};

std::int64_t sent(CollectiveKind kind, std::int64_t elems, int elem_bytes, const Group& group) {
  return ring_volume(kind, elems, elem_bytes, group.index, group.ranks).sent_bytes;
}

// An all_reduce of `elems` cut in calls of at most `bucket_elems`, as start_all_reduce cuts it.
std::int64_t bucketed_all_reduce(std::int64_t elems, int elem_bytes, std::int64_t bucket_elems,
                                 const Group& group) {
  const std::int64_t whole = elems / bucket_elems;  // full buckets, all alike
  return whole * sent(CollectiveKind::AllReduce, bucket_elems, elem_bytes, group) +
         sent(CollectiveKind::AllReduce, elems - whole * bucket_elems, elem_bytes, group);
}

// How many times each unit runs in a forward pass.
std::vector<int> visits_of(const std::vector<int>& forward_order, std::size_t units) {
  std::vector<int> visits(units, forward_order.empty() ? 1 : 0);
  for (const int u : forward_order) {
    ZL_CHECK(u >= 0 && static_cast<std::size_t>(u) < units,
             "estimate_traffic: forward order names unit {} of {}", u, units);
    ++visits[static_cast<std::size_t>(u)];
  }
  return visits;
}

// The model's units and the world, with the groups a stage's collectives run among.
struct StepShape {
  std::vector<UnitLayout> layout;  // padded for the group that shards
  std::vector<int> visits;
  std::vector<bool> kept_whole;  // ZeRO-3's persistent units
  int gpus_per_node = 1;         // G (the world on one node: W)
  Group world;
  Group node, nodes;     // this rank's node, and rank i of every node (qgZ's two levels)
  Group shards, across;  // the group that shards, and its replicas (a group of one when none)
};

StepShape shape_of(const std::vector<UnitSpec>& units, const TrafficWorld& world,
                   const TrainingFeatures& features, int shard_ranks, int rank) {
  const int w = world.world;
  const int g = world.gpus_per_node > 0 ? world.gpus_per_node : w;
  StepShape shape;
  shape.gpus_per_node = g;
  shape.world = {w, rank, link_level_of(w, w / g), "N"};
  shape.node = {g, rank % g, link_level_of(g, 1), "G"};
  shape.nodes = {w / g, rank / g, link_level_of(w / g, w / g), "M"};
  const bool hybrid = shard_ranks > 0 && shard_ranks < w;
  ZL_CHECK(!hybrid || shard_ranks == g,
           "a shard group of {} ranks is not a node of {}: hybrid sharding shards inside one node",
           shard_ranks, g);
  shape.shards = hybrid ? shape.node : shape.world;
  shape.across = hybrid ? shape.nodes : Group{1, 0, LinkLevel::Across, "M"};
  shape.layout = layout_units(units, shape.shards.ranks);
  shape.visits = visits_of(world.forward_order, units.size());
  shape.kept_whole = persistent_units(shape.layout, features);
  return shape;
}

// Throws zl::Error when a step's bytes could wrap int64: no term moves more than 8 bytes an
// element for each of a unit's visits and its reduction, every micro-batch.
void check_range(const StepShape& shape, std::int64_t micro_batches) {
  constexpr std::string_view advice = "estimate fewer parameters or micro-batches";
  std::int64_t elems = 0;
  for (std::size_t u = 0; u < shape.layout.size(); ++u) {
    elems = checked_add(
        elems, checked_mul(shape.layout[u].padded_elems, 2 * shape.visits[u] + 4, advice), advice);
  }
  checked_mul(checked_mul(elems, 8, advice), micro_batches, advice);
}

// Sums f(unit, visits) over the layout's units, or those ZeRO-3 keeps whole or does not
// (`kept_whole` true or false).
template <typename F>
std::int64_t over_units(const StepShape& shape, F f, std::optional<bool> kept_whole = {}) {
  std::int64_t total = 0;
  for (std::size_t u = 0; u < shape.layout.size(); ++u) {
    if (kept_whole && shape.kept_whole[u] != *kept_whole) continue;
    total += f(shape.layout[u], shape.visits[u]);
  }
  return total;
}

// Every unit's gradient reduced into the own shard, once a micro-batch: one reduce_scatter over
// the shard group, and with nodes the fp32 all_reduce of the shard across them.
void reduce_gradients(Step& step, const StepShape& shape, int p, std::int64_t bucket_elems) {
  step.per_micro_batch("gradients", CollectiveKind::ReduceScatter, shape.shards,
                       over_units(shape,
                                  [&](const UnitLayout& unit, int) {
                                    return sent(CollectiveKind::ReduceScatter, unit.padded_elems, p,
                                                shape.shards);
                                  }),
                       step.ring(shape.shards, "Ψp"));
  step.per_micro_batch("gradient shards, fp32", CollectiveKind::AllReduce, shape.across,
                       over_units(shape,
                                  [&](const UnitLayout& unit, int) {
                                    return bucketed_all_reduce(unit.shard_elems, 4, bucket_elems,
                                                               shape.across);
                                  }),
                       "2(M-1)/M · 4Ψp/G");
}

// The grad norm's all_gather of each rank's tree sums (fp64) over the shard group.
void norm_sums(Step& step, const StepShape& shape) {
  const std::int64_t sums = norm_sums_per_rank(shape.layout, shape.shards.ranks);
  step.per_step("grad norm's tree sums, fp64", CollectiveKind::AllGather, shape.shards,
                sent(CollectiveKind::AllGather, sums * shape.shards.ranks, 8, shape.shards),
                fmt::format("({}-1) · 8 · {}", shape.shards.symbol, sums));
}

// Each visit's gathers of the units not kept whole, over `group`.
std::int64_t visit_gathers(const StepShape& shape, const Group& group, int p) {
  return over_units(
      shape,
      [&](const UnitLayout& unit, int visits) {
        return visits * sent(CollectiveKind::AllGather, unit.padded_elems, p, group);
      },
      /*kept_whole=*/false);
}

// ZeRO++'s int8 gathers of each visit's primary shards from the world.
std::int64_t quantized_gathers(const StepShape& shape) {
  return over_units(
      shape,
      [&](const UnitLayout& unit, int visits) {
        const std::int64_t bytes =
            quantized_bytes(unit.shard_elems, kQuantBlockElems, QuantBits::Int8);
        return visits * sent(CollectiveKind::AllGather, bytes * shape.world.ranks, 1, shape.world);
      },
      /*kept_whole=*/false);
}

// One all_gather of each unit (kept whole or not, as `kept_whole` says) over the shard group.
std::int64_t unit_gathers(const StepShape& shape, int p, std::optional<bool> kept_whole) {
  return over_units(
      shape,
      [&](const UnitLayout& unit, int) {
        return sent(CollectiveKind::AllGather, unit.padded_elems, p, shape.shards);
      },
      kept_whole);
}

void zero3_traffic(Step& step, const StepShape& shape, const TrainingFeatures& features, int p,
                   int rank) {
  // Each visit's gathers from the shard group (int8 codes and scales under qwZ), or from `group`.
  const auto pass = [&](const std::string& what, const Group& group, bool quantized) {
    if (quantized) {
      step.per_micro_batch(fmt::format("parameters, {} (int8)", what), CollectiveKind::AllGather,
                           shape.world, quantized_gathers(shape), "(N-1) · q8(Ψf/N)");
      return;
    }
    step.per_micro_batch(fmt::format("parameters, {}", what), CollectiveKind::AllGather, group,
                         visit_gathers(shape, group, p), step.ring(group, "Ψf"));
  };
  // 1. forward, and 2. backward: the same gathers, or hpZ's inside its partition
  pass("forward", shape.shards, features.quantized_weights);
  const int k = uses_zeropp(features) ? std::max(features.hpz_partition_ranks, 1) : 1;
  if (k > 1) {
    const int g = shape.gpus_per_node;
    pass("backward (hpZ)", {k, rank % k, link_level_of(k, k <= g ? 1 : k / g), "K"}, false);
  } else {
    pass("backward", shape.shards, features.quantized_weights);
  }
  // the gradients: ZeRO-3's (or HSDP's two levels), or qgZ's two all_to_alls of int4
  if (features.quantized_gradients) {
    const Group& node = shape.node;
    const Group& nodes = shape.nodes;
    step.per_micro_batch(
        "gradients (int4)", CollectiveKind::AllToAll, node,
        over_units(shape,
                   [&](const UnitLayout& unit, int) {
                     const std::int64_t piece = quantized_bytes(nodes.ranks * unit.shard_elems,
                                                                kQuantBlockElems, QuantBits::Int4);
                     return sent(CollectiveKind::AllToAll, piece * node.ranks, 1, node);
                   }),
        "(G-1) · q4(MΨp/N)");
    step.per_micro_batch(
        "gradient pieces (int4)", CollectiveKind::AllToAll, nodes,
        over_units(shape,
                   [&](const UnitLayout& unit, int) {
                     const std::int64_t piece =
                         quantized_bytes(unit.shard_elems, kQuantBlockElems, QuantBits::Int4);
                     return sent(CollectiveKind::AllToAll, piece * nodes.ranks, 1, nodes);
                   }),
        "(M-1) · q4(Ψp/N)");
  } else {
    reduce_gradients(step, shape, p, features.reduce_bucket_elems);
  }
  // 3. update, then the grad norm before it, and the persistent units made whole after it
  norm_sums(step, shape);
  step.per_step("persistent parameters", CollectiveKind::AllGather, shape.shards,
                unit_gathers(shape, p, /*kept_whole=*/true), step.ring(shape.shards, "Ψw"));
}

}  // namespace

TrafficEstimate estimate_traffic(const std::vector<UnitSpec>& units, const TrafficWorld& world,
                                 const TrainingFeatures& features, int stage, int rank) {
  ZL_CHECK(stage >= 0 && stage <= 3, "estimate_traffic: stage {} is not 0 to 3", stage);
  ZL_CHECK(world.world >= 1 && rank >= 0 && rank < world.world,
           "estimate_traffic: rank {} of a world of {}", rank, world.world);
  ZL_CHECK(world.gpus_per_node >= 0 &&
               (world.gpus_per_node == 0 || world.world % world.gpus_per_node == 0),
           "--gpus-per-node {} does not divide --world {}: give a divisor of it",
           world.gpus_per_node, world.world);
  // The features as the stage's engine takes them.
  TrainingFeatures used = features;
  if (stage < 3) {
    used.hpz_partition_ranks = 0;
    used.quantized_weights = used.quantized_gradients = false;
  }
  if (stage == 0) used.shard_group_ranks = 0;
  validate(used);
  const int shard_ranks = stage > 0 ? checked_shard_group(used, world.world) : 0;
  if (stage == 3 && uses_zeropp(used)) validate_zeropp(used, world.world);

  const StepShape shape = shape_of(units, world, used, shard_ranks, rank);
  check_range(shape, used.grad_accum_steps);
  const int p = training_bytes_per_param(used.precision);
  Step step(used.grad_accum_steps, p);
  if (stage == 0) {
    step.per_micro_batch("gradients", CollectiveKind::AllReduce, shape.world,
                         over_units(shape,
                                    [&](const UnitLayout& unit, int) {
                                      return bucketed_all_reduce(unit.padded_elems, p,
                                                                 used.reduce_bucket_elems,
                                                                 shape.world);
                                    }),
                         fmt::format("2(N-1)/N · {}Ψp", p));
  } else if (stage < 3) {
    reduce_gradients(step, shape, p, used.reduce_bucket_elems);
    norm_sums(step, shape);
    step.per_step("parameters", CollectiveKind::AllGather, shape.shards,
                  unit_gathers(shape, p, /*kept_whole=*/{}), step.ring(shape.shards, "Ψp"));
  } else {
    zero3_traffic(step, shape, used, p, rank);
  }
  step.per_step("the logged loss, fp32", CollectiveKind::AllReduce, shape.world,
                sent(CollectiveKind::AllReduce, 1, 4, shape.world), "one value");
  return {.stage = stage,
          .engine = engine_label(engine_of_stage(stage), used, world.world),
          .terms = step.take()};
}

}  // namespace zl
