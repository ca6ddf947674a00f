// collective_memory.cpp — the process's registry of memory spaces, and which one a call uses.
#include "collective_memory.hpp"

#include <algorithm>
#include <mutex>
#include <vector>

#include "core/error.hpp"

namespace zl {

namespace {

struct Registry {
  std::mutex mutex;
  std::vector<CollectiveMemory*> spaces;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

// The space of `spaces` holding `ptr`, or nullptr for host memory.
CollectiveMemory* space_of(const std::vector<CollectiveMemory*>& spaces, const void* ptr) {
  for (CollectiveMemory* space : spaces) {
    if (space->holds(ptr)) return space;
  }
  return nullptr;
}

}  // namespace

void register_collective_memory(CollectiveMemory& space) {
  Registry& spaces = registry();
  std::lock_guard lock(spaces.mutex);
  if (std::find(spaces.spaces.begin(), spaces.spaces.end(), &space) == spaces.spaces.end()) {
    spaces.spaces.push_back(&space);
  }
}

void unregister_collective_memory(const CollectiveMemory& space) {
  Registry& spaces = registry();
  std::lock_guard lock(spaces.mutex);
  std::erase(spaces.spaces, &space);
}

CollectiveMemory* collective_memory_of(std::span<const CallDesc> calls) {
  if (calls.empty() || calls.front().kind == CollectiveKind::Barrier) return nullptr;
  Registry& spaces = registry();
  std::lock_guard lock(spaces.mutex);
  if (spaces.spaces.empty()) return nullptr;  // none registered: all host memory
  CollectiveMemory* found = nullptr;
  int found_rank = -1;
  for (std::size_t r = 0; r < calls.size(); ++r) {
    for (const void* ptr : {calls[r].send, static_cast<const void*>(calls[r].recv)}) {
      if (ptr == nullptr) continue;
      CollectiveMemory* space = space_of(spaces.spaces, ptr);
      if (found_rank < 0) {
        found = space;
        found_rank = static_cast<int>(r);
        continue;
      }
      ZL_CHECK(space == found,
               "{}: rank {} passed {} memory but rank {} passed {} memory: every rank must "
               "communicate buffers of the same kind",
               describe(calls[r]), r, space != nullptr ? "device" : "host", found_rank,
               found != nullptr ? "device" : "host");
    }
  }
  return found;
}

}  // namespace zl
