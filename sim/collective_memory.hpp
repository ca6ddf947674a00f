// collective_memory.hpp — memory the simulator cannot read or write itself: a GPU's, shared by
// the ranks' threads of one process, or a test device's that the host may not touch. Such a
// memory space registers here; a collective whose buffers it holds is carried out by the space
// (with the same rank-order reductions), not by the host code of execute.cpp.
#pragma once

#include <span>

#include "call_desc.hpp"

namespace zl {

/// A memory space the simulator hands collectives to.
class CollectiveMemory {
 public:
  virtual ~CollectiveMemory() = default;
  /// True when `ptr` points into this space.
  virtual bool holds(const void* ptr) const = 0;
  /// Carries out the collective rank r posted as `calls[r]`, every buffer in this space: the
  /// bits of execute_collective on host memory (reduce_rank_order for reductions). Every rank's
  /// earlier work on its buffers is complete before it reads them, and every output is written
  /// when it returns.
  virtual void execute(std::span<const CallDesc> calls) = 0;
};

/// Makes `space` known to every SimWorld of this process until it is unregistered. Thread-safe.
void register_collective_memory(CollectiveMemory& space);

/// Forgets `space` (nothing if it was not registered). Thread-safe.
void unregister_collective_memory(const CollectiveMemory& space);

/// The registered space holding the buffers of `calls` (those of non-empty calls), or nullptr
/// when they are all host memory. Throws zl::Error naming the rank when some ranks' buffers are
/// in a space and others' are not (or in another one).
CollectiveMemory* collective_memory_of(std::span<const CallDesc> calls);

}  // namespace zl
