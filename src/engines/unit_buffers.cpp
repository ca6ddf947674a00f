// unit_buffers.cpp — allocation, views, init, the unit loop of a micro-batch, AdamW, norms, copies.
#include "engines/unit_buffers.hpp"

#include <algorithm>
#include <cmath>

#include "optim/adamw.hpp"
#include "engines/typed_span.hpp"
#include "optim/grad_norm.hpp"

namespace zl {

UnitBuffers alloc_units(Device& device, const std::vector<UnitLayout>& layout, MemCategory category,
                        bool shard, DType dtype) {
  UnitBuffers buffers;
  buffers.reserve(layout.size());
  for (const auto& unit : layout) {
    buffers.push_back(
        device.alloc(category, dtype, {shard ? unit.shard_elems : unit.padded_elems}));
  }
  return buffers;
}

UnitSpans spans_of(UnitBuffers& buffers) {
  UnitSpans spans;
  for (auto& buffer : buffers) spans.push_back(buffer.as<float>());
  return spans;
}

UnitSpans own_shards(UnitBuffers& full, const std::vector<UnitLayout>& layout, int rank,
                     int world) {
  UnitSpans spans;
  for (std::size_t u = 0; u < layout.size(); ++u) {
    const ShardRange shard = shard_of(layout[u], rank, world);
    spans.push_back(full[u].as<float>().subspan(static_cast<std::size_t>(shard.begin),
                                                static_cast<std::size_t>(shard.size())));
  }
  return spans;
}

void init_params(const Model& model, const std::vector<UnitLayout>& layout, UnitBuffers& params,
                 std::uint64_t seed, Device& device) {
  for (std::size_t u = 0; u < layout.size(); ++u) {
    const auto real = static_cast<std::size_t>(layout[u].numel);
    if (params[u].dtype() == DType::F32) {
      model.init_unit(static_cast<int>(u), params[u].as<float>().first(real), seed);
      continue;
    }
    Buffer fp32 = device.alloc(MemCategory::Gathered, DType::F32, {layout[u].numel});
    model.init_unit(static_cast<int>(u), fp32.as<float>(), seed);
    round_into(fp32.as<float>(), view_of(params[u]).slice(0, layout[u].numel));
  }
}

void zero_units(UnitBuffers& buffers) {
  for (auto& buffer : buffers) std::ranges::fill(buffer.as<float>(), 0.0f);
}

void notify(const EngineOptions& options, const Device& device, std::string_view phase, int unit) {
  if (options.observer) options.observer({phase, unit}, device.ledger());
}

float forward_backward(Model& model, const Batch& batch, const std::vector<UnitLayout>& layout,
                       const UnitBuffers& params, UnitBuffers& grads, const EngineOptions& options,
                       const Device& device) {
  const int units = static_cast<int>(layout.size());
  model.begin(batch);
  for (int u = 0; u < units; ++u) {
    model.forward_unit(u, params[u].as<float>().first(layout[u].numel));
    notify(options, device, "forward", u);
  }
  const float loss = model.loss();
  for (int u = units - 1; u >= 0; --u) {
    model.backward_unit(u, params[u].as<float>().first(layout[u].numel),
                        grads[u].as<float>().first(layout[u].numel));
    notify(options, device, "backward", u);
  }
  return loss;
}

double grad_norm_of(const UnitBuffers& grads) {
  std::vector<double> partials;
  for (const auto& unit : grads) append_block_sumsq(unit.as<float>(), partials);
  return norm_from_partials(partials);
}

std::vector<std::vector<float>> unpadded_copy(const std::vector<UnitLayout>& layout,
                                              const UnitBuffers& buffers) {
  std::vector<std::vector<float>> copies;
  for (std::size_t u = 0; u < layout.size(); ++u) {
    const auto real = buffers[u].as<float>().first(layout[u].numel);
    copies.emplace_back(real.begin(), real.end());
  }
  return copies;
}

AdamState alloc_adam(Device& device, const std::vector<UnitLayout>& layout, bool shard) {
  return {alloc_units(device, layout, MemCategory::Optimizer, shard),
          alloc_units(device, layout, MemCategory::Optimizer, shard)};
}

bool should_update(double grad_norm, std::int64_t step, const EngineOptions& options) {
  if (std::isfinite(grad_norm)) return true;
  if (options.nonfinite == NonFinitePolicy::Stop) throw NonFiniteError(step, grad_norm);
  return false;
}

void adamw_units(const UnitSpans& params, const UnitSpans& grads, AdamState& adam,
                 const AdamWConfig& config) {
  const AdamWScalars scalars = adamw_scalars(config, ++adam.updates);
  for (std::size_t u = 0; u < params.size(); ++u) {
    adamw_update(params[u], grads[u], adam.exp_avg[u].as<float>(), adam.exp_avg_sq[u].as<float>(),
                 scalars);
  }
}

ModelState model_state(const std::vector<UnitLayout>& layout, UnitBuffers& params,
                       AdamState& adam) {
  return {unpadded_copy(layout, params), unpadded_copy(layout, adam.exp_avg),
          unpadded_copy(layout, adam.exp_avg_sq)};
}

}  // namespace zl
