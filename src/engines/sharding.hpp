// sharding.hpp — the collective pieces the engines share: gathering a unit from its shards,
// reduce-scattering a unit's gradient, the canonical gradient norm from shards, all-gathering
// updated parameters, and moving the optimizer's owned state in and out (ShardState, ModelState).
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <vector>

#include "comm/comm.hpp"
#include "engines/optimizer_step.hpp"
#include "engines/typed_span.hpp"
#include "engines/unit_buffers.hpp"

namespace zl {

/// Collectives started for one unit (several when bucketed), the buffers they read or write, and
/// what to do once they are complete (unpacking a bucketed gather). wait() waits for all of them
/// in order, runs `finish`, and releases the buffers. Blocking starts leave nothing to wait for
/// but `finish`.
struct InFlight {
  std::vector<CommHandle> handles;  ///< one per collective call started, in call order
  std::vector<Buffer> buffers;      ///< staging buffers the calls read or write; freed by wait()
  std::function<void()> finish;     ///< run once after the last handle completes; may be empty
  /// Waits every handle in order, runs `finish` once, then frees the buffers; a second call
  /// does nothing.
  void wait();
};

/// all_gather_into, started: with `async` the calls are async (overlap_comm) and `full` is
/// complete only after wait(); without, it is complete on return (wait() is then a no-op).
InFlight start_all_gather(Comm& comm, Device& device, TypedSpan shard, TypedSpan full,
                          std::int64_t bucket_elems, bool async);

/// reduce_scatter_unit, started (see start_all_gather); `full` must stay untouched until wait().
InFlight start_reduce_scatter(Comm& comm, Device& device, TypedSpan full, TypedSpan shard,
                              std::int64_t bucket_elems, bool async, ReduceOp op = ReduceOp::Avg);

/// all_reduce_unit, started (see start_all_gather).
InFlight start_all_reduce(Comm& comm, TypedSpan grad, std::int64_t bucket_elems, bool async,
                          ReduceOp op = ReduceOp::Avg);

/// Waits for every flight, oldest first, and empties the list.
void wait_all(std::vector<InFlight>& flights);

/// Keeps at most `max_flights` in the list, waiting for the oldest ones beyond: with overlap_comm
/// at most two units' reductions are in flight, as DeepSpeed double-buffers its buckets.
void bound_in_flight(std::vector<InFlight>& flights, std::size_t max_flights);

/// A copy of `grad` in a CommBuffer bucket, for an async reduction whose caller releases `grad`
/// before the wait.
Buffer comm_copy(Device& device, TypedSpan grad);

/// ZeRO-2 and ZeRO-3: reduce a unit's complete gradient into this rank's gradient shard, which
/// the first micro-batch of a step writes and later ones add to (add_into, after the reduction).
/// With `async` the gradient is first copied into a CommBuffer bucket (comm_copy: the caller's
/// buffer is released when it returns) unless `grad_kept` (the caller keeps it as it is until the
/// wait), and the reduce-scatter only started; the shard is final after wait(). Without, it is
/// final on return.
InFlight reduce_into_shard(Comm& comm, Device& device, TypedSpan grad, TypedSpan shard,
                           bool first_micro_batch, std::int64_t bucket_elems, bool async,
                           bool grad_kept = false);

/// all_gather of unit `unit`'s shards into a new full, padded buffer of the shard's dtype, booked
/// as `category` (Gathered for ZeRO-3's temporaries), in calls of at most `bucket_elems`
/// (allgather_bucket_size, see all_gather_into). Collective.
Buffer gather_unit(Comm& comm, Device& device, const UnitLayout& unit, TypedSpan shard,
                   std::int64_t bucket_elems, MemCategory category = MemCategory::Gathered);

/// all_gather of every rank's `shard` into `full` (W shards back to back; `shard` may be this
/// rank's slice of it). A call moves at most `bucket_elems` elements in all: a unit larger than
/// that goes in pieces, each gathering the same slice of every rank's shard through a packed
/// CommBuffer. Same bytes sent, more calls. Collective.
void all_gather_into(Comm& comm, Device& device, TypedSpan shard, TypedSpan full,
                     std::int64_t bucket_elems);

/// reduce_scatter(avg, or `op`) of a unit's full gradient: this rank receives its averaged shard.
/// `shard` may be this rank's slice of `full` (in place, as NCCL allows). A call reduces at most
/// `bucket_elems` elements (reduce_bucket_size): larger units go in pieces, each the same slice of
/// every rank's shard, packed in a CommBuffer. Elementwise sums, so the bits do not depend on the
/// bucket size. Collective.
void reduce_scatter_unit(Comm& comm, Device& device, TypedSpan full, TypedSpan shard,
                         std::int64_t bucket_elems, ReduceOp op = ReduceOp::Avg);

/// all_reduce(avg, or `op`) of a unit's gradient in place, in contiguous calls of at most
/// `bucket_elems` elements (reduce_bucket_size). Collective.
void all_reduce_unit(Comm& comm, TypedSpan grad, std::int64_t bucket_elems,
                     ReduceOp op = ReduceOp::Avg);

/// A step's loss sum: one float in the device's memory, zero, booked as CommBuffer, into which
/// run_micro_batch adds each micro-batch's loss.
Buffer step_loss_sum(Device& device);

/// The logged loss: `loss_sum` (a step's micro-batch losses added up on the device) divided by
/// `micro_batches`, then the mean over the ranks, one 4-byte all_reduce (avg) on the device, as
/// nanoGPT logs it; the host reads it once. Engines call it once backward's reductions are
/// complete and before the gradient norm, so it never waits behind the step's parameter
/// all_gathers. Collective.
float mean_loss_over_ranks(Comm& comm, Device& device, std::span<float> loss_sum,
                           std::int64_t micro_batches);

/// all_gather of every unit's parameters in place: each rank contributes its freshly updated
/// shard of `params` (full unit buffers) and ends with them whole, in buckets of
/// options.features.allgather_bucket_elems. Emits an "all_gather" event per unit. Returns one
/// flight per unit: complete already, or with overlap_comm started asynchronously, so that the
/// next forward waits for each unit only when it reaches it. Collective.
std::vector<InFlight> all_gather_params(Comm& comm, UnitBuffers& params,
                                        const std::vector<UnitLayout>& layout,
                                        const EngineOptions& options, Device& device);
/// Full unpadded copies of sharded fp32 buffers, assembled with one all_gather per unit; a rank
/// that does not `keep` them takes part in the calls and gets empty vectors (so that W ranks of
/// one process do not hold W copies of the model). Collective.
std::vector<std::vector<float>> gather_unpadded(Comm& comm, Device& device,
                                                const std::vector<UnitLayout>& layout,
                                                const UnitSpans& shards, bool keep);

/// Host copies of `shards` (one span per unit of `device`'s memory).
std::vector<std::vector<float>> copy_shards(Device& device, const UnitSpans& shards);

/// Writes the host `values[u]` into `shards[u]` (`device`'s memory) for every unit; sizes must
/// match.
void assign_shards(Device& device, const UnitSpans& shards,
                   const std::vector<std::vector<float>>& values);

/// Fills whole fp32 unit buffers from `values` (this rank's shards): writes the own slice, then
/// all-gathers the rest in place. Collective.
void load_full_from_shards(Comm& comm, Device& device, UnitBuffers& full,
                           const std::vector<UnitLayout>& layout,
                           const std::vector<std::vector<float>>& values);

/// This rank's ShardState from an optimizer that owns shards (ZeRO-1, -2, -3): the fp32
/// parameters (master, or the owned parameters in fp32), the moments, the update count and the
/// loss scaler.
ShardState owned_shard_state(OptimizerState& state, const std::vector<TypedSpan>& owned_params,
                             Device& device);

/// Loads `shards` into an optimizer that owns shards: master (rounded into the owned 16-bit
/// parameters) or the fp32 parameters, moments, update count, scaler. No communication.
void load_owned_shard_state(OptimizerState& state, const std::vector<TypedSpan>& owned_params,
                            const ShardState& shards, Device& device);

/// Full state, on the host, of an engine that holds whole units (DDP, the reference): the real
/// (unpadded) elements of the fp32 parameters (master, or `params` themselves) and the moments;
/// empty unless `keep` (Engine::full_state: world rank 0 keeps it).
ModelState whole_model_state(Device& device, const std::vector<UnitLayout>& layout,
                             OptimizerState& state, const std::vector<TypedSpan>& params,
                             bool keep = true);

/// Full state of an engine whose optimizer owns shards, kept by the rank that `keep`s it (by
/// default `comm`'s rank 0), empty on the others. Collective.
ModelState gather_model_state(Comm& comm, Device& device, const std::vector<UnitLayout>& layout,
                              OptimizerState& state, const std::vector<TypedSpan>& owned_params,
                              std::optional<bool> keep = std::nullopt);

}  // namespace zl
