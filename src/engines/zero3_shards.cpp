// zero3_shards.cpp — ZeRO-3's own parameter shards in device memory, host memory or on disk.
#include "engines/zero3_shards.hpp"

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
  std::vector<std::int64_t> disk_elems;  // offload_param on nvme: the shards on disk
  for (std::size_t u = 0; u < layout_.size(); ++u) {
    const UnitLayout& unit = layout_[u];
    const bool on_host = offload_ && !persistent_[u];
    const bool on_disk = on_host && !features.param_nvme_path.empty();
    opt.params_on_host.push_back(on_host);
    disk_elems.push_back(on_disk ? unit.shard_elems : 0);
    if (on_disk) {
      params_.emplace_back();
      continue;
    }
    params_.push_back(device.alloc(on_host ? MemCategory::HostParams : MemCategory::Params,
                                   precision_,
                                   {persistent_[u] ? unit.padded_elems : unit.shard_elems}));
  }
  if (!features.param_nvme_path.empty()) {
    disk_ = std::make_unique<ParamSwap>(device, &comm, features.param_nvme_path, precision_,
                                        std::move(disk_elems), features.aio);
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

}  // namespace zl
