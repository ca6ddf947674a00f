// collective_checks.hpp — ZL_COLLECTIVE_CHECKS, the NCCL backend's debug switch that compares
// every call across the ranks before its data moves (as PyTorch's TORCH_DISTRIBUTED_DEBUG=DETAIL;
// the sim and MPI always compare). Read here, without NCCL, so that the run's fingerprint
// (run/run_fingerprint.hpp) can hold it: ranks that disagree on it would otherwise hang, one
// waiting in a check the others never make.
#pragma once

#include <string>

namespace zl {

/// ZL_COLLECTIVE_CHECKS in words: "on" for "1", "off" when unset, empty or "0", and otherwise the
/// value as it is set (which collective_checks_from_env() refuses).
std::string collective_checks_setting();

/// Whether ZL_COLLECTIVE_CHECKS asks NcclComm to compare every call across the ranks before its
/// data moves: "1" yes; unset, empty or "0" no. Throws zl::Error naming the variable otherwise.
bool collective_checks_from_env();

}  // namespace zl
