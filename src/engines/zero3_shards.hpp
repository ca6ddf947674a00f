// zero3_shards.hpp — where ZeRO-3 keeps its own parameter shards: device memory (Params), host
// memory with offload_param (HostParams), or with its nvme_path, past max_in_cpu, a swap file on
// disk (param_swap.hpp); units below the persistence threshold stay whole on the device. zero3.cpp
// asks for the own shards, for one unit's shard on the device (what a gather sends), and for the
// whole buffer of a persistent unit; where they live never changes a result.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "comm/comm.hpp"
#include "engines/engine.hpp"
#include "engines/optimizer_step.hpp"
#include "engines/param_swap.hpp"
#include "engines/partition.hpp"
#include "engines/unit_buffers.hpp"

namespace zl {

/// Which units of `layout` ZeRO-3 keeps whole on every rank: those with fewer (unpadded) elements
/// than features.persistence_threshold_elems (stage3_param_persistence_threshold).
std::vector<bool> persistent_units(const std::vector<UnitLayout>& layout,
                                   const TrainingFeatures& features);

/// One rank's ZeRO-3 parameters in the training dtype: its shard of each unit (a persistent
/// unit's whole buffer), each initialised as the model does.
class Zero3Shards {
 public:
  /// Allocates them where `features` say and initialises them from `model` with `seed`; marks in
  /// `opt` which units live in host memory and, on disk, that the update holds them
  /// (OptimizerState::held_params).
  Zero3Shards(Model& model, Device& device, Comm& comm, const std::vector<UnitLayout>& layout,
              const TrainingFeatures& features, std::uint64_t seed, OptimizerState& opt);

  /// True for units below the persistence threshold: whole on every rank, never gathered.
  bool persistent(std::size_t unit) const { return persistent_.at(unit); }
  /// persistent() of every unit.
  const std::vector<bool>& persistent_units() const { return persistent_; }
  /// Makes every persistent unit whole again from the ranks' own slices (after an update changed
  /// them): an all_gather over the comm the shards were made for; `gathered(u)` after each.
  void gather_persistent(std::int64_t bucket_elems, const std::function<void(int)>& gathered);
  /// The whole buffer of a persistent unit.
  TypedSpan whole(std::size_t unit) { return view_of(params_.at(unit)); }
  /// The own shard of every unit (a persistent unit's own slice); a unit on disk is a
  /// placeholder the update holds (OptimizerState::held_params).
  std::vector<TypedSpan> own();
  /// The own shard of `unit` in device memory: the shard itself, or with offload_param a copy in
  /// `staged` (booked as a comm buffer, counted as a host-to-device copy), read from disk first
  /// when it lives there.
  TypedSpan on_device(std::size_t unit, Buffer& staged);
  /// True when some shards live on disk (offload_param on nvme, past max_in_cpu; with every shard
  /// kept in host memory there is no swap file).
  bool reads_from_disk() const { return disk_ != nullptr; }
  /// Starts reading `unit`'s shard from disk for an on_device() to come (ParamSwap::read_ahead);
  /// true for a unit not on disk.
  bool read_ahead(std::size_t unit) { return !on_disk(unit) || disk_->read_ahead(unit); }

 private:
  bool on_disk(std::size_t unit) const { return disk_ && disk_->on_disk(unit); }
  // Every rank runs the (deterministic) init of one unit at a time and keeps what it holds.
  void init(Model& model, std::uint64_t seed);

  Device& device_;
  Comm& comm_;
  const std::vector<UnitLayout>& layout_;
  DType precision_;
  bool offload_ = false;
  std::vector<bool> persistent_;
  UnitBuffers params_;               // own shard (whole for persistent units); empty on disk
  std::unique_ptr<ParamSwap> disk_;  // offload_param on nvme
};

/// What VisitGathers reads ahead with for `shards` (VisitGathers::ReadAhead): their shards on
/// disk, for forward visits only when `forward_only` (hpZ's backward gathers read the secondary
/// shards); empty when none is on disk.
std::function<bool(int unit, bool backward)> read_ahead_of(Zero3Shards& shards,
                                                           bool forward_only = false);

}  // namespace zl
