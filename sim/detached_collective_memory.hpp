// detached_collective_memory.hpp — the simulator's side of ops/cpu/detached_cpu_device.hpp:
// collectives on detached devices' buffers, carried out by execute.cpp's host code on the
// devices' read-write views, so they give the bits of the same collective on host buffers.
#pragma once

#include <span>

#include "collective_memory.hpp"

namespace zl {

/// The memory of every live DetachedCpuDevice of the process, as one collective memory space.
class DetachedCollectiveMemory : public CollectiveMemory {
 public:
  /// True when a live DetachedCpuDevice handed out `ptr`.
  bool holds(const void* ptr) const override;
  /// execute_collective on copies of `calls` whose buffers point into the devices' read-write
  /// views (host memory, so it takes the host path).
  void execute(std::span<const CallDesc> calls) override;
};

/// The process's DetachedCollectiveMemory, registered with register_collective_memory on the
/// first call (thread-safe). Call it once before a SimWorld runs collectives on detached buffers.
CollectiveMemory& detached_collective_memory();

}  // namespace zl
