// memory_ledger.cpp — bookkeeping of bytes per category.
#include "core/memory_ledger.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace zl {

std::string_view mem_category_name(MemCategory category) {
  switch (category) {
    case MemCategory::Params: return "params";
    case MemCategory::Grads: return "grads";
    case MemCategory::Master: return "master";
    case MemCategory::Optimizer: return "optimizer";
    case MemCategory::Gathered: return "gathered";
    case MemCategory::CommBuffer: return "comm_buffer";
    case MemCategory::Activations: return "activations";
    case MemCategory::HostMaster: return "host_master";
    case MemCategory::HostOptimizer: return "host_optimizer";
    case MemCategory::HostGrads: return "host_grads";
  }
  fail("unknown memory category {}", static_cast<int>(category));
}

void MemoryLedger::book(MemCategory category, std::int64_t bytes) {
  auto& current = current_[index(category)];
  current += bytes;
  peak_[index(category)] = std::max(peak_[index(category)], current);
  total_current_ += bytes;
  total_peak_ = std::max(total_peak_, total_current_);
}

void MemoryLedger::release(MemCategory category, std::int64_t bytes) {
  auto& current = current_[index(category)];
  ZL_CHECK(current >= bytes, "memory ledger: releasing {} bytes of {} but only {} are booked",
           bytes, mem_category_name(category), current);
  current -= bytes;
  total_current_ -= bytes;
}

}  // namespace zl
