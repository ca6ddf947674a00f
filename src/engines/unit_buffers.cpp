// unit_buffers.cpp — allocation, views, init, moments and the non-finite decision.
#include "engines/unit_buffers.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

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
    std::vector<float> init(static_cast<std::size_t>(layout[u].numel));
    model.init_unit(static_cast<int>(u), init, seed);
    upload_rounded(device, init, view_of(params[u]).slice(0, layout[u].numel));
  }
}

void zero_units(Device& device, UnitBuffers& buffers) {
  for (auto& buffer : buffers) {
    device.fill_zero(buffer.data(), static_cast<std::size_t>(buffer.bytes()));
  }
}

void notify(const EngineOptions& options, const Device& device, std::string_view phase, int unit) {
  if (options.observer) options.observer({phase, unit}, device.ledger());
}

AdamState alloc_adam(Device& device, const std::vector<UnitLayout>& layout, bool shard,
                     MemCategory category) {
  return {alloc_units(device, layout, category, shard), alloc_units(device, layout, category, shard)};
}

bool should_update(double grad_norm, std::int64_t step, const EngineOptions& options) {
  if (std::isfinite(grad_norm)) return true;
  if (options.nonfinite == NonFinitePolicy::Stop) throw NonFiniteError(step, grad_norm);
  return false;
}

}  // namespace zl
