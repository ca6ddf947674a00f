// zeropp.cpp — ZeRO++: ZeRO-3 with less communication across nodes, three ways, each on its own.
//   hpZ  hierarchical partitioning (zero_hpz_partition_size K): besides its primary shard
//        (ZeRO-3's, one of W) each rank keeps a secondary shard, its slice of the unit cut among
//        the K ranks of its partition group (a node), which the forward gather fills for free;
//        backward gathers from those K ranks, never across the nodes. Psi/K more memory a rank.
//   qwZ  quantized weights (zero_quantized_weights): each gather from the world moves int8 codes
//        of blocks of 256 and their scales instead of the training dtype (half of bf16's bytes).
//   qgZ  quantized gradients (zero_quantized_gradients): the gradient reduce is two all_to_alls
//        of int4 codes, inside the node and then one piece a node across, instead of a
//        reduce_scatter over the world (int4, a quarter of bf16's bytes, crosses the nodes once).
// Per step, for each of the k accumulated micro-batches:
//   1. forward    for each unit: all_gather its primary shards from the world (int8 under qwZ),
//                 copy this rank's slice of the K-way cut into its secondary shard (hpZ), run the
//                 unit, release it
//   2. backward   for each unit, last first: all_gather the secondary shards inside the group
//                 (hpZ; else the primaries from the world, as forward), run its backward into a
//                 full gradient, reduce it to the world's average of the own gradient shard:
//                 reduce_scatter (avg) over the world, or qgZ's all_to_alls (added to the shard
//                 after the first micro-batch)
// then
//   3. update     the optimizer step on the own primary shard; the secondary shards are stale
//                 until the next forward refills them
// As in ZeRO-3, units below stage3_param_persistence_threshold stay whole on every rank (no
// secondary shard, gathered from the world after the update), overlap_comm runs the world's
// reduce_scatter while backward goes on (qgZ's all_to_alls block), offload_param keeps the
// primary shards in host memory or on disk, and stage3_prefetch_bucket_size gathers the next
// visits ahead (visit_gathers.hpp; under hpZ within the pass, as backward's gathers read the
// secondary shards forward's left).
// hpZ's gathers only copy bits and its reduction is ZeRO-3's, so hpZ alone is ZeRO-3 bit for bit
// (with K = W, ZeRO-3 with one more copy). qwZ and qgZ round: deterministic run to run, each
// value within its blocks' bound (comm/quantize.hpp), not the reference's bits.
#include <algorithm>
#include <memory>

#include "engines/engine.hpp"
#include "engines/micro_batch.hpp"
#include "engines/quantized_comm.hpp"
#include "engines/shard_groups.hpp"
#include "engines/sharding.hpp"
#include "engines/visit_gathers.hpp"
#include "engines/zero3_shards.hpp"

namespace zl {

namespace {

// K (1 without hpZ), once the features are checked for this engine.
int partition_of(const TrainingFeatures& features, int world) {
  validate_zeropp(features, world);
  return std::max(features.hpz_partition_ranks, 1);
}

// hpZ's partition group, or null without hpZ.
std::unique_ptr<Comm> partition_group(Comm& world, int ranks) {
  return ranks > 1 ? world.split(world.rank() / ranks) : nullptr;
}

// qgZ's two levels, the nodes and the ranks of one local rank across them; no split without qgZ.
int reduce_nodes_of(const TrainingFeatures& features) {
  return features.quantized_gradients ? features.node_ranks : 0;
}

// Each unit's secondary shard: its padded buffer cut in K (the world's padding is a multiple of
// K's), in the training dtype, booked as parameters; none without hpZ, nor for the units ZeRO-3
// keeps whole (an empty buffer: they are never gathered).
UnitBuffers alloc_secondary(Device& device, const std::vector<UnitLayout>& layout, int ranks,
                            DType dtype, const std::vector<bool>& kept_whole) {
  UnitBuffers secondary;
  if (ranks <= 1) return secondary;
  for (std::size_t u = 0; u < layout.size(); ++u) {
    secondary.push_back(kept_whole[u] ? Buffer{}
                                      : device.alloc_unset(MemCategory::Params, dtype,
                                                           {layout[u].padded_elems / ranks}));
  }
  return secondary;
}

class ZeroPlusPlusEngine final : public Engine {
 public:
  ZeroPlusPlusEngine(Model& model, Device& device, Comm& world, const EngineOptions& options)
      : model_(model),
        device_(device),
        world_(world),
        options_(options),
        features_(options.features),
        partition_ranks_(partition_of(features_, world.size())),
        partition_(partition_group(world, partition_ranks_)),
        reduce_groups_(world, reduce_nodes_of(features_)),
        layout_(layout_units(model.units(), world.size())),
        grad_shards_(
            alloc_units(device, layout_, MemCategory::Grads, /*shard=*/true, features_.precision)),
        opt_(alloc_optimizer(device, layout_, features_, /*shard=*/true)),
        shards_(model, device, world, layout_, features_, options.seed, opt_),
        secondary_(alloc_secondary(device, layout_, partition_ranks_, features_.precision,
                                   shards_.persistent_units())),
        gathers_(
            model.forward_order(), layout_, shards_.persistent_units(),
            features_.prefetch_bucket_elems, /*within_pass=*/partition_ != nullptr,
            [this](int unit, bool backward, bool ahead) {
              return start_gather(unit, backward, ahead);
            },
            read_ahead_of(shards_, /*forward_only=*/partition_ != nullptr)) {
    validate(features_);
    opt_.comm = &world;
    master_from_params(opt_, shards_.own(), device_);
  }

  StepStats step(std::int64_t step) override {
    const std::int64_t micro_steps = features_.grad_accum_steps;
    Buffer loss_sum = step_loss_sum(device_);  // the losses, added on the device
    for (std::int64_t k = 0; k < micro_steps; ++k) {
      // 1. forward from the world's shards and 2. backward from the group's
      gathers_.begin_micro_batch();
      run_micro_batch(model_, options_.batch(step * micro_steps + k, world_.rank()), layout_,
                      features_.precision, grad_scale_of(opt_, features_), hooks(k == 0), options_,
                      device_, loss_sum.as<float>());
      wait_all(in_flight_);
    }
    const float loss = mean_loss_over_ranks(world_, device_, loss_sum.as<float>(), micro_steps);
    const std::vector<TypedSpan> grads = owned_spans(grad_shards_, layout_, false, 0, 1);
    const double loss_scale = opt_.scaler.scale();  // what backward multiplied by
    const double lr = update_lr(opt_, options_);    // before the update moves the schedule
    const double grad_norm =
        sharded_grad_norm(world_, device_, layout_, unscaled_partials(grads, loss_scale, device_));
    // 3. update the own primary shard (unless the step is skipped); persistent units are made
    //    whole
    const bool update =
        optimizer_step(grad_norm, step, shards_.own(), grads, opt_, options_, device_);
    if (update) notify(options_, device_, "update");
    gather_persistent(options_);
    return {.loss = loss,
            .grad_norm = grad_norm,
            .skipped = !update,
            .loss_scale = loss_scale,
            .lr = lr};
  }

  ModelState full_state() override {
    return gather_model_state(world_, device_, layout_, opt_, shards_.own());
  }

  // The primary shards are ZeRO-3's: so are the checkpoints, which any stage resumes.
  ShardState shard_state() override { return owned_shard_state(opt_, shards_.own(), device_); }

  void load_shard_state(const ShardState& state) override {
    load_owned_shard_state(opt_, shards_.own(), state, device_);
    gather_persistent({});
  }

 private:
  MicroBatchHooks hooks(bool first_micro_batch) {
    MicroBatchHooks hooks;
    hooks.params = [this](int u, bool) {
      if (!shards_.persistent(u)) return gathers_.next(u);
      gathers_.skip();
      return UnitParams{shards_.whole(u), {}};
    };
    hooks.grad_ready = [this, first_micro_batch](int u, TypedSpan grad) {
      if (features_.quantized_gradients) {
        reduce_into_shard_quantized(reduce_groups_, device_, grad, view_of(grad_shards_[u]),
                                    first_micro_batch);
      } else {
        in_flight_.push_back(reduce_into_shard(world_, device_, grad, view_of(grad_shards_[u]),
                                               first_micro_batch, features_.reduce_bucket_elems,
                                               features_.overlap_comm));
        bound_in_flight(in_flight_, 2);
      }
      notify(options_, device_, "reduce_scatter", u);
    };
    return hooks;
  }

  // One visit's gather, async with overlap_comm when it runs ahead of its visit: forward, the
  // unit from the world's primary shards (int8 codes through the host, at once, under qwZ), hpZ
  // keeping this rank's slice of the K-way cut once it is there; backward under hpZ, from the
  // group's secondary shards, so no byte crosses between the groups.
  VisitGather start_gather(int u, bool backward, bool ahead) {
    const bool async = ahead && features_.overlap_comm;
    VisitGather gather;
    if (backward && partition_) {
      gather.params = device_.alloc_unset(MemCategory::Gathered, features_.precision,
                                          {layout_[u].padded_elems});
      gather.flight =
          start_all_gather(*partition_, device_, view_of(secondary_[u]), view_of(gather.params),
                           features_.allgather_bucket_elems, async);
    } else if (features_.quantized_weights) {
      gather.params =
          gather_unit_quantized(world_, device_, layout_[u], shards_.on_device(u, gather.staged));
      if (!backward) keep_secondary(u, view_of(gather.params));
    } else {
      gather.params = device_.alloc_unset(MemCategory::Gathered, features_.precision,
                                          {layout_[u].padded_elems});
      gather.flight =
          start_all_gather(world_, device_, shards_.on_device(u, gather.staged),
                           view_of(gather.params), features_.allgather_bucket_elems, async);
      if (!backward) {
        gather.flight.finish = [this, u, unpack = std::move(gather.flight.finish),
                                full = view_of(gather.params)] {
          if (unpack) unpack();
          keep_secondary(u, full);
        };
      }
    }
    notify(options_, device_, "gather", u);
    return gather;
  }

  // hpZ: this rank's slice of the K-way cut of the gathered unit `full`, its secondary shard.
  void keep_secondary(int u, TypedSpan full) {
    if (!partition_) return;
    const TypedSpan secondary = view_of(secondary_[u]);
    copy_into(device_, full.slice(partition_->rank() * secondary.elems, secondary.elems),
              secondary);
  }

  // Units below the persistence threshold, whole on every rank: gathered from the world once the
  // update changed their shards.
  void gather_persistent(const EngineOptions& options) {
    shards_.gather_persistent(features_.allgather_bucket_elems,
                              [&](int u) { notify(options, device_, "all_gather", u); });
  }

  Model& model_;
  Device& device_;
  Comm& world_;
  EngineOptions options_;
  TrainingFeatures features_;
  int partition_ranks_;              // K: the ranks that share one secondary partition (1: no hpZ)
  std::unique_ptr<Comm> partition_;  // this rank's partition group (a node); null without hpZ
  ShardGroups reduce_groups_;        // qgZ's node and across groups; the world alone without
  std::vector<UnitLayout> layout_;       // laid out for the world, as ZeRO-3
  UnitBuffers grad_shards_;              // own shard of the averaged (accumulated) gradients
  OptimizerState opt_;                   // own shard
  Zero3Shards shards_;                   // own primary parameter shards, training dtype
  UnitBuffers secondary_;                // own secondary shards, refilled by every forward (hpZ)
  std::vector<InFlight> in_flight_;      // overlap_comm: reduce_scatters started during backward
  VisitGathers gathers_;                 // each visit's gather, or its prefetch
};

}  // namespace

std::unique_ptr<Engine> make_zeropp_engine(Model& model, Device& device, Comm& comm,
                                           const EngineOptions& options) {
  return std::make_unique<ZeroPlusPlusEngine>(model, device, comm, options);
}

}  // namespace zl
