// optimizer_step.hpp — the end of every step, shared by the reference and every engine, on the
// part of the model a rank updates (whole units, or its own shards):
//   1. unscale   g = g / loss_scale, widened to fp32 (fp16's dynamic scaling; 1 otherwise)
//   2. norm      the canonical norm's block partials of those fp32 gradients
//   3. decide    a non-finite norm skips the step on every rank (fp16: an overflow, the scale
//                halves; otherwise NonFinitePolicy decides)
//   4. clip      g = g * min(1, max_norm / (norm + 1e-6)), as torch.nn.utils.clip_grad_norm_
//   5. update    AdamW at the schedule's lr for this update (lr_schedule.hpp), on the fp32
//                master (or on the fp32 parameters themselves), then the 16-bit parameters
//                are re-made from the master (round to nearest even)
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <span>
#include <vector>

#include "comm/comm.hpp"
#include "engines/engine.hpp"
#include "engines/step_norm.hpp"
#include "engines/typed_span.hpp"
#include "engines/unit_buffers.hpp"

namespace zl {

class NvmeSwap;

/// How the update streams the NVMe tier's units through host memory (offload_optimizer's
/// pipeline_read, pipeline_write and buffer_count).
struct SwapPipeline {
  bool read = false;     ///< read the next unit while one updates
  bool write = false;    ///< write a unit back while the next one updates
  int buffer_count = 4;  ///< units in host memory at once, at most
};

/// Owned parameters that are in memory only while held (ZeRO-3's shards on the NVMe tier): the
/// update, and whatever else reads or writes them, holds a unit around its use.
class HeldParams {
 public:
  virtual ~HeldParams() = default;
  /// Unit `unit`'s owned parameters, in memory for one more holder until release(unit).
  virtual TypedSpan hold(std::size_t unit) = 0;
  /// Lets go of unit `unit` for one holder; the last one writes it back when `written` (or when an
  /// earlier holder wrote it) and frees its memory.
  virtual void release(std::size_t unit, bool written) = 0;
  /// Starts bringing unit `unit` into memory for a hold to come, where there is room; false when
  /// there is none now (a caller reading ahead stops there).
  virtual bool read_ahead(std::size_t unit) = 0;
  /// Ends every read and write in flight; with `unwinding`, errors are dropped (the first one is
  /// already on its way).
  virtual void settle(bool unwinding) = 0;
};

/// What the optimizer owns for the part of the model a rank updates. With ZeRO-Offload the master
/// and the moments are host memory (HostMaster, HostOptimizer) and the update runs there: each
/// unit's gradient goes to the host (HostGrads, noted as a device-to-host copy through `comm`)
/// and its updated parameters come back (a host-to-device copy). With the NVMe tier they live in
/// a swap file and are in host memory only while held (optimizer_swap.hpp).
struct OptimizerState {
  UnitBuffers master;    ///< fp32 copy of the owned parameters (16-bit or offload); else empty
  AdamState adam;        ///< Adam's moments and update count
  LossScaler scaler;     ///< dynamic for fp16, fixed at 1 otherwise
  bool offload = false;  ///< master and moments in host memory
  /// Per unit: its owned parameters are in host memory (ZeRO-3 offload_param); an update made
  /// on the device sends them back (a device-to-host copy). Empty: none are.
  std::vector<bool> params_on_host;
  /// Where offload's copies are noted (Comm::host_copy: the traffic ledger, and the timeline of
  /// backends that keep one); may be null.
  Comm* comm = nullptr;
  /// ZeRO-Infinity (features.nvme_path): the master and moments live in this swap file and their
  /// buffers above are empty but while swap_in holds them. Null: they are always in memory.
  std::shared_ptr<NvmeSwap> nvme;
  /// ZeRO-3's parameter shards on the NVMe tier: an owned-parameter span the calls below take
  /// with no data is a placeholder (its size) for a unit this holds, held around its use. Null:
  /// the spans are the parameters.
  HeldParams* held_params = nullptr;
  /// With the NVMe tier: how the update streams it (optimizer_swap.hpp).
  SwapPipeline pipeline{};
};

/// Zeroed state for whole units or (`shard`) the own shards, booked as Master and Optimizer (or
/// HostMaster and HostOptimizer with features.offload_optimizer, which always keeps a master).
OptimizerState alloc_optimizer(Device& device, const std::vector<UnitLayout>& layout,
                               const TrainingFeatures& features, bool shard);

/// Parameters in the training dtype: zeroed buffers of every unit (or shard), booked as Params.
UnitBuffers alloc_params(Device& device, const std::vector<UnitLayout>& layout, DType precision,
                         bool shard);

/// The factor backward scales the loss by: loss scale / accumulation steps.
float grad_scale_of(const OptimizerState& state, const TrainingFeatures& features);

/// One span per unit over the owned part of each buffer: whole buffers, or rank `rank`'s shard.
std::vector<TypedSpan> owned_spans(UnitBuffers& buffers, const std::vector<UnitLayout>& layout,
                                   bool shard_of_full, int rank, int world);

/// The fp32 parameters the optimizer updates: the master when there is one, else the owned
/// parameters themselves.
UnitSpans fp32_params(OptimizerState& state, const std::vector<TypedSpan>& owned_params);

/// Sets the owned parameters to the master, rounded (nothing to do without a master). From the
/// NVMe tier, every unit is back on disk when it returns, its write ended.
void params_from_master(OptimizerState& state, const std::vector<TypedSpan>& owned_params,
                        Device& device);

/// Sets the master to the owned parameters, widened (after init; nothing to do without one).
/// From the NVMe tier, every unit is back on disk when it returns, its write ended.
void master_from_params(OptimizerState& state, const std::vector<TypedSpan>& owned_params,
                        Device& device);

/// The learning rate the next applied update of `state` runs at (options.lr_schedule after
/// state.adam.updates applied updates).
double update_lr(const OptimizerState& state, const EngineOptions& options);

/// Step 3 for optimizer step `step` (0-based) given the canonical norm: true when the step
/// updates. Under fp16's dynamic scaling a non-finite norm is an overflow: the scale backs off
/// and the step is skipped; otherwise NonFinitePolicy decides (NonFiniteError under Stop).
bool decide_update(double grad_norm, std::int64_t step, OptimizerState& state,
                   const EngineOptions& options);

/// Step 4's factor: min(1, grad_clip / (norm + 1e-6)) with clipping on, else exactly 1.
float clip_factor(double grad_norm, const TrainingFeatures& features);

/// Step 5: AdamW at the schedule's lr on `params` (the elements this rank updates: whole units
/// or its own shards, the optimizer state's sizes, else zl::Error saying so) with `grads`
/// unscaled and multiplied by `clip`; then the 16-bit parameters from the master, and the loss
/// scaler notes a finite step.
void adamw_step(const std::vector<TypedSpan>& params, const std::vector<TypedSpan>& grads,
                float clip, OptimizerState& state, const EngineOptions& options, Device& device);

/// Steps 3-5 for optimizer step `step` (0-based) given the canonical norm: decide_update, then
/// adamw_step with clip_factor. Returns true when the parameters were updated.
bool optimizer_step(double grad_norm, std::int64_t step, const std::vector<TypedSpan>& params,
                    const std::vector<TypedSpan>& grads, OptimizerState& state,
                    const EngineOptions& options, Device& device);

}  // namespace zl
