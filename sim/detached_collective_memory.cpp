// detached_collective_memory.cpp — detached devices' collectives: the same calls on the
// read-write views, then the host path of execute_collective.
#include "detached_collective_memory.hpp"

#include <vector>

#include "execute.hpp"
#include "ops/cpu/detached_cpu_device.hpp"

namespace zl {

bool DetachedCollectiveMemory::holds(const void* ptr) const {
  return DetachedCpuDevice::host_view(ptr) != nullptr;
}

void DetachedCollectiveMemory::execute(std::span<const CallDesc> calls) {
  // collective_memory_of checked that every buffer of these calls is detached.
  std::vector<CallDesc> on_host(calls.begin(), calls.end());
  for (CallDesc& call : on_host) {
    if (call.send != nullptr) call.send = DetachedCpuDevice::host_view(call.send);
    if (call.recv != nullptr) call.recv = DetachedCpuDevice::host_view(call.recv);
  }
  execute_collective(on_host);
}

CollectiveMemory& detached_collective_memory() {
  static DetachedCollectiveMemory& space = []() -> DetachedCollectiveMemory& {
    static DetachedCollectiveMemory instance;
    register_collective_memory(instance);
    return instance;
  }();
  return space;
}

}  // namespace zl
