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
    case MemCategory::HostActivations: return "host_activations";
    case MemCategory::HostParams: return "host_params";
    case MemCategory::NvmeMaster: return "nvme_master";
    case MemCategory::NvmeOptimizer: return "nvme_optimizer";
    case MemCategory::NvmeParams:
      return "nvme_params";
  }
  fail("unknown memory category {}", static_cast<int>(category));
}

std::string_view activation_kind_name(ActivationKind kind) {
  switch (kind) {
    case ActivationKind::Inputs: return "inputs";
    case ActivationKind::Block: return "block";
    case ActivationKind::Attention: return "attention";
    case ActivationKind::MlpHidden: return "mlp_hidden";
    case ActivationKind::Logits: return "logits";
    case ActivationKind::Scratch: return "scratch";
    case ActivationKind::Checkpoint: return "checkpoint";
    case ActivationKind::Recompute: return "recompute";
    
  }
  fail("unknown activation kind {}", static_cast<int>(kind));
}

void MemoryLedger::book(MemCategory category, std::int64_t bytes, ActivationKind kind) {
  auto& current = current_[index(category)];
  current += bytes;
  if (category == MemCategory::Activations) {
    activations_[static_cast<int>(kind)] += bytes;
    if (current > peak_[index(category)]) activations_at_peak_ = activations_;
  }
  peak_[index(category)] = std::max(peak_[index(category)], current);
  if (is_disk(category)) return;
  total_current_ += bytes;
  total_peak_ = std::max(total_peak_, total_current_);
  if (is_host(category)) {
    host_peak_ = std::max(host_peak_, host_current_bytes());
  } else {
    device_current_ += bytes;
    device_peak_ = std::max(device_peak_, device_current_);
  }
}

void MemoryLedger::release(MemCategory category, std::int64_t bytes, ActivationKind kind) {
  auto& current = current_[index(category)];
  ZL_CHECK(current >= bytes, "memory ledger: releasing {} bytes of {} but only {} are booked",
           bytes, mem_category_name(category), current);
  if (category == MemCategory::Activations) {
    auto& of_kind = activations_[static_cast<int>(kind)];
    ZL_CHECK(of_kind >= bytes,
             "memory ledger: releasing {} bytes of {} activations but only {} are booked", bytes,
             activation_kind_name(kind), of_kind);
    of_kind -= bytes;
  }
  current -= bytes;
  if (is_disk(category)) return;
  total_current_ -= bytes;
  if (!is_host(category)) device_current_ -= bytes;
}

}  // namespace zl
