// optimizer_step.cpp — unscale, norm partials, the skip decision, clipping and the update.
#include "engines/optimizer_step.hpp"

#include <algorithm>
#include <cmath>
#include <exception>

#include "engines/nvme_swap.hpp"
#include "engines/optimizer_swap.hpp"
#include "optim/adamw.hpp"
#include "optim/grad_norm.hpp"

namespace zl {

namespace {

bool mixed(const OptimizerState& state) {
  return !state.master.empty();
}

// With the optimizer offloaded, unit `grad` widened to fp32 in host memory (`host_copy`),
// counting the copy: what the host's update reads.
TensorIn widened_on_host(TypedSpan grad, OptimizerState& state, Device& device, Buffer& host_copy) {
  host_copy = device.alloc(MemCategory::HostGrads, DType::F32, {grad.elems});
  widen(device, grad, host_copy.as<float>());
  if (state.comm != nullptr) state.comm->host_copy(HostCopy::ToHost, grad.bytes());
  return host_copy;
}

// The copies an update of `bytes` of owned parameters makes between host and device: with the
// optimizer offloaded they come back to the device, unless they live on the host too; updated on
// the device, parameters that live on the host go back there (and, with no master to update
// from, `read_on_device`, they came up first).
void count_param_copies(OptimizerState& state, std::size_t unit, std::int64_t bytes,
                        bool read_on_device) {
  const bool on_host = unit < state.params_on_host.size() && state.params_on_host[unit];
  if (state.comm == nullptr || state.offload == on_host) return;
  if (state.offload) {
    state.comm->host_copy(HostCopy::ToDevice, bytes);
    return;
  }
  if (read_on_device) state.comm->host_copy(HostCopy::ToDevice, bytes);
  state.comm->host_copy(HostCopy::ToHost, bytes);
}

// fn(unit `unit`'s owned parameters): `owned[unit]` itself, or, where that is a placeholder (no
// data), held from state.held_params around the call and written back when `written`; the next
// placeholders' reads start while fn runs, as far as there is room.
template <class Fn>
void with_params(OptimizerState& state, const std::vector<TypedSpan>& owned, std::size_t unit,
                 bool written, Fn&& fn) {
  if (state.held_params == nullptr || owned[unit].data != nullptr) return fn(owned[unit]);
  const TypedSpan params = state.held_params->hold(unit);
  for (std::size_t next = unit + 1; next < owned.size(); ++next) {
    if (owned[next].data == nullptr && !state.held_params->read_ahead(next)) break;
  }
  fn(params);
  state.held_params->release(unit, written);
}

// Ends the held parameters' reads and writes in flight (HeldParams::settle) when the scope ends,
// dropping their errors when an exception is already unwinding.
class HeldSettler {
 public:
  explicit HeldSettler(const OptimizerState& state) : held_(state.held_params) {}
  ~HeldSettler() noexcept(false) {
    if (held_ != nullptr) held_->settle(std::uncaught_exceptions() != unwinding_);
  }
  HeldSettler(const HeldSettler&) = delete;
  HeldSettler& operator=(const HeldSettler&) = delete;

 private:
  HeldParams* held_;
  int unwinding_ = std::uncaught_exceptions();
};

}  // namespace

OptimizerState alloc_optimizer(Device& device, const std::vector<UnitLayout>& layout,
                               const TrainingFeatures& features, bool shard) {
  const bool offload = features.offload_optimizer;
  // ZeRO-Infinity: every unit starts on disk, as zeros, and swap_in allocates its buffers. The
  // swap file is made first: a folder that cannot hold it throws here, with nothing to undo.
  std::shared_ptr<NvmeSwap> nvme;
  if (offload && !features.nvme_path.empty()) {
    std::vector<std::int64_t> unit_elems;
    for (const auto& unit : layout)
      unit_elems.push_back(shard ? unit.shard_elems : unit.padded_elems);
    nvme =
        std::make_shared<NvmeSwap>(device.ledger(), features.nvme_path, unit_elems, features.aio);
  }
  AdamState adam = nvme ? AdamState{.exp_avg = UnitBuffers(layout.size()),
                                    .exp_avg_sq = UnitBuffers(layout.size()),
                                    .updates = 0}
                        : alloc_adam(device, layout, shard,
                                     offload ? MemCategory::HostOptimizer : MemCategory::Optimizer);
  OptimizerState state{.master = {},
                       .adam = std::move(adam),
                       .scaler = {},
                       .offload = offload,
                       .params_on_host = {},
                       .comm = nullptr,
                       .nvme = std::move(nvme),
                       .held_params = nullptr,
                       .pipeline = {.read = features.pipeline_read,
                                    .write = features.pipeline_write,
                                    .buffer_count = features.swap_buffer_count}};
  if (state.nvme) {
    state.master = UnitBuffers(layout.size());
  } else if (features.precision != DType::F32 || offload) {
    state.master =
        alloc_units(device, layout, offload ? MemCategory::HostMaster : MemCategory::Master, shard);
  }
  if (features.precision == DType::F16) state.scaler = LossScaler(features.loss_scale);
  return state;
}

UnitBuffers alloc_params(Device& device, const std::vector<UnitLayout>& layout, DType precision,
                         bool shard) {
  return alloc_units(device, layout, MemCategory::Params, shard, precision);
}

float grad_scale_of(const OptimizerState& state, const TrainingFeatures& features) {
  return static_cast<float>(state.scaler.scale() / static_cast<double>(features.grad_accum_steps));
}

std::vector<TypedSpan> owned_spans(UnitBuffers& buffers, const std::vector<UnitLayout>& layout,
                                   bool shard_of_full, int rank, int world) {
  std::vector<TypedSpan> spans;
  for (std::size_t u = 0; u < buffers.size(); ++u) {
    const TypedSpan all = view_of(buffers[u]);
    if (!shard_of_full) {
      spans.push_back(all);
      continue;
    }
    const ShardRange shard = shard_of(layout[u], rank, world);
    spans.push_back(all.slice(shard.begin, shard.size()));
  }
  return spans;
}

UnitSpans fp32_params(OptimizerState& state, const std::vector<TypedSpan>& owned_params) {
  if (mixed(state)) return spans_of(state.master);
  UnitSpans spans;
  for (const TypedSpan& params : owned_params) spans.push_back(params.f32());
  return spans;
}

void params_from_master(OptimizerState& state, const std::vector<TypedSpan>& owned_params,
                        Device& device) {
  if (!mixed(state)) return;
  // Every unit is back on disk at the end, its write ended: the next update's swaps are its own.
  SwapSettler swaps(state);
  const HeldSettler settler(state);
  for (std::size_t u = 0; u < owned_params.size(); ++u) {
    swap_in(state, device, u);
    with_params(state, owned_params, u, /*written=*/true,
                [&](TypedSpan params) { round_into(device, state.master[u].as<float>(), params); });
    swap_out(state, u);
  }
}

void master_from_params(OptimizerState& state, const std::vector<TypedSpan>& owned_params,
                        Device& device) {
  if (!mixed(state)) return;
  // Every unit is back on disk at the end, its write ended: the next update's swaps are its own.
  SwapSettler swaps(state);
  const HeldSettler settler(state);
  for (std::size_t u = 0; u < owned_params.size(); ++u) {
    swap_in(state, device, u);
    with_params(state, owned_params, u, /*written=*/false,
                [&](TypedSpan params) { widen(device, params, state.master[u].as<float>()); });
    swap_out(state, u);
  }
}

double update_lr(const OptimizerState& state, const EngineOptions& options) {
  return scheduled_adamw(options.adamw, options.lr_schedule, state.adam.updates).lr;
}

bool decide_update(double grad_norm, std::int64_t step, OptimizerState& state,
                   const EngineOptions& options) {
  // The norm has the same bits on every rank and in the reference.
  if (state.scaler.skips_overflows()) {
    if (std::isfinite(grad_norm)) return true;
    state.scaler.update(/*overflow=*/true);
    return false;
  }
  return should_update(grad_norm, step, options);
}

float clip_factor(double grad_norm, const TrainingFeatures& features) {
  const double max_norm = features.grad_clip;
  return max_norm > 0.0 ? static_cast<float>(std::min(1.0, max_norm / (grad_norm + 1e-6))) : 1.0f;
}

void adamw_step(const std::vector<TypedSpan>& params, const std::vector<TypedSpan>& grads,
                float clip, OptimizerState& state, const EngineOptions& options, Device& device) {
  ZL_CHECK(params.size() == grads.size() && grads.size() == state.adam.exp_avg.size(),
           "the update got {} parameter units and {} gradient units for {} units of optimizer "
           "state",
           params.size(), grads.size(), state.adam.exp_avg.size());
  for (std::size_t u = 0; u < params.size(); ++u) {
    const std::int64_t state_elems =
        state.nvme ? state.nvme->unit_elems(u) : state.adam.exp_avg[u].elems();
    ZL_CHECK(params[u].elems == state_elems && grads[u].elems == state_elems,
             "unit {}: the update got {} parameters and {} gradient elements for {} elements of "
             "optimizer state: pass the elements this rank updates (its own shard under ZeRO), "
             "the same for all three",
             u, params[u].elems, grads[u].elems, state_elems);
  }
  // Unit by unit (from the NVMe tier, one unit's master and moments at a time; offloaded, one
  // unit's fp32 gradient in host memory at a time). A clip factor of exactly 1 changes nothing,
  // so it is skipped.
  const AdamWConfig now = scheduled_adamw(options.adamw, options.lr_schedule, state.adam.updates);
  const AdamWScalars scalars = adamw_scalars(now, ++state.adam.updates);
  const auto loss_scale = static_cast<float>(state.scaler.scale());
  // From the NVMe tier, with pipeline_read the next unit comes in while this one updates, and
  // with pipeline_write this one goes out while the next updates; all are back on disk at the end.
  SwapStepTimer timer(state);
  {
    SwapSettler settler(state);
    const HeldSettler params_settler(state);
    for (std::size_t u = 0; u < grads.size(); ++u) {
      swap_in(state, device, u);
      prefetch(state, device, u + 1);
      with_params(state, params, u, /*written=*/true, [&](TypedSpan owned) {
        const std::span<float> master = mixed(state) ? state.master[u].as<float>() : owned.f32();
        ZL_CHECK(owned.elems == static_cast<std::int64_t>(master.size()),
                 "unit {}: {} parameters for a master of {}", u, owned.elems, master.size());
        // The update reads the reduced gradient as it is (16-bit, scaled; offloaded, the host's
        // widened copy) and unscales and clips each element as it goes; a mixed update writes
        // the 16-bit parameters too, the new master rounded in the same pass.
        timer.kernels([&] {
          Buffer host_copy;
          const TensorIn g = state.offload ? widened_on_host(grads[u], state, device, host_copy)
                                           : tensor_of(grads[u]);
          device.adamw_update_unscaled(master, g, loss_scale, clip,
                                       state.adam.exp_avg[u].as<float>(),
                                       state.adam.exp_avg_sq[u].as<float>(), scalars,
                                       mixed(state) ? owned.data : nullptr, owned.dtype);
        });
        count_param_copies(state, u, owned.bytes(), /*read_on_device=*/!mixed(state));
      });
      swap_out(state, u);
    }
  }
  timer.record();
  state.scaler.update(/*overflow=*/false);
}

bool optimizer_step(double grad_norm, std::int64_t step, const std::vector<TypedSpan>& params,
                    const std::vector<TypedSpan>& grads, OptimizerState& state,
                    const EngineOptions& options, Device& device) {
  if (!decide_update(grad_norm, step, state, options)) return false;  // 3. decide
  const float clip = clip_factor(grad_norm, options.features);        // 4. clip
  adamw_step(params, grads, clip, state, options, device);            // 5. update
  return true;
}

}  // namespace zl
