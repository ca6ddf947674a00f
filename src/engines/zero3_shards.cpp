// zero3_shards.cpp — ZeRO-3's own parameter shards in device memory, host memory or on disk.
#include "engines/zero3_shards.hpp"

#include <algorithm>
#include <span>

#include "engines/sharding.hpp"

namespace zl {

std::vector<bool> persistent_units(const std::vector<UnitLayout>& layout,
                                   const TrainingFeatures& features) {
  std::vector<bool> persistent;
  for (const UnitLayout& unit : layout) {
    persistent.push_back(unit.numel < features.persistence_threshold_elems);
  }
  return persistent;
}

Zero3Shards::Zero3Shards(Model& model, Device& device, Comm& comm,
                         const std::vector<UnitLayout>& layout, const TrainingFeatures& features,
                         std::uint64_t seed, OptimizerState& opt)
    : device_(device),
      comm_(comm),
      layout_(layout),
      precision_(features.precision),
      offload_(features.offload_param),
      persistent_(zl::persistent_units(layout, features)) {
  // offload_param: every shard in host memory but the persistent units'; on nvme, those past
  // max_in_cpu on disk
  std::vector<std::int64_t> offloaded_elems;
  for (std::size_t u = 0; u < layout_.size(); ++u) {
    offloaded_elems.push_back(offload_ && !persistent_[u] ? layout_[u].shard_elems : 0);
  }
  const std::vector<bool> disk =
      features.param_nvme_path.empty()
          ? std::vector<bool>(layout_.size(), false)
          : shards_on_disk(offloaded_elems, features.param_max_in_cpu_elems);
  std::vector<std::int64_t> disk_elems;
  for (std::size_t u = 0; u < layout_.size(); ++u) {
    const UnitLayout& unit = layout_[u];
    const bool on_host = offloaded_elems[u] > 0;
    opt.params_on_host.push_back(on_host);
    disk_elems.push_back(disk[u] ? unit.shard_elems : 0);
    if (disk[u]) {
      params_.emplace_back();
      continue;
    }
    params_.push_back(device.alloc(on_host ? MemCategory::HostParams : MemCategory::Params,
                                   precision_,
                                   {persistent_[u] ? unit.padded_elems : unit.shard_elems}));
  }
  if (std::ranges::find(disk, true) != disk.end()) {  // max_in_cpu may keep every shard
    disk_ = std::make_unique<ParamSwap>(device, &comm, features.param_nvme_path, precision_,
                                        std::move(disk_elems),
                                        ParamBuffers{.count = features.param_buffer_count,
                                                     .max_elems = features.param_buffer_elems},
                                        features.aio);
    opt.held_params = disk_.get();
  }
  init(model, seed);
}

std::vector<TypedSpan> Zero3Shards::own() {
  std::vector<TypedSpan> spans;
  for (std::size_t u = 0; u < layout_.size(); ++u) {
    if (on_disk(u)) {
      spans.push_back(disk_->placeholder(u));
      continue;
    }
    const TypedSpan all = view_of(params_[u]);
    const ShardRange shard = shard_of(layout_[u], comm_.rank(), comm_.size());
    spans.push_back(persistent_[u] ? all.slice(shard.begin, shard.size()) : all);
  }
  return spans;
}

TypedSpan Zero3Shards::on_device(std::size_t unit, Buffer& staged) {
  if (!offload_) return view_of(params_[unit]);
  staged = device_.alloc_unset(MemCategory::CommBuffer, precision_, {layout_[unit].shard_elems});
  const TypedSpan host = on_disk(unit) ? disk_->hold(unit) : view_of(params_[unit]);
  device_.copy_from_host(staged.data(), host.data, static_cast<std::size_t>(host.bytes()));
  if (on_disk(unit)) disk_->release(unit, /*written=*/false);
  comm_.host_copy(HostCopy::ToDevice, host.bytes());
  return view_of(staged);
}

void Zero3Shards::init(Model& model, std::uint64_t seed) {
  for (std::size_t u = 0; u < layout_.size(); ++u) {
    std::vector<float> full(static_cast<std::size_t>(layout_[u].padded_elems));  // padding: 0
    model.init_unit(static_cast<int>(u),
                    std::span<float>(full).first(static_cast<std::size_t>(layout_[u].numel)), seed);
    const ShardRange shard = shard_of(layout_[u], comm_.rank(), comm_.size());
    const auto values = persistent_[u] ? std::span<const float>(full)
                                       : std::span<const float>(full).subspan(
                                             static_cast<std::size_t>(shard.begin),
                                             static_cast<std::size_t>(shard.size()));
    upload_rounded(device_, values, on_disk(u) ? disk_->hold(u) : view_of(params_[u]));
    if (on_disk(u)) disk_->release(u, /*written=*/true);
  }
}

void Zero3Shards::gather_persistent(std::int64_t bucket_elems,
                                    const std::function<void(int)>& gathered) {
  const std::vector<TypedSpan> shards = own();
  for (std::size_t u = 0; u < layout_.size(); ++u) {
    if (!persistent_[u]) continue;
    all_gather_into(comm_, device_, shards[u], whole(u), bucket_elems);
    gathered(static_cast<int>(u));
  }
}

std::function<bool(int unit, bool backward)> read_ahead_of(Zero3Shards& shards, bool forward_only) {
  if (!shards.reads_from_disk()) return {};
  return [&shards, forward_only](int unit, bool backward) {
    return (forward_only && backward) || shards.read_ahead(static_cast<std::size_t>(unit));
  };
}

}  // namespace zl
