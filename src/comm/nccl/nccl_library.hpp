// nccl_library.hpp — the NCCL functions zerolab calls, looked up in libnccl on first use (dlopen,
// ops/cuda/shared_library.hpp) instead of linked: `nccl().AllReduce(...)`. nccl.h still gives the
// types; the library is mapped only by a process that makes an NCCL id or communicator.
#pragma once

#include <nccl.h>

#include <string>

namespace zl {

/// The NCCL entry points zerolab uses, each pointing into the loaded library. Members are named
/// after nccl.h's functions without the prefix.
struct NcclLibrary {
  /// ncclGetUniqueId.
  decltype(&::ncclGetUniqueId) GetUniqueId = nullptr;
  /// ncclCommInitRank.
  decltype(&::ncclCommInitRank) CommInitRank = nullptr;
  /// ncclCommDestroy.
  decltype(&::ncclCommDestroy) CommDestroy = nullptr;
  /// ncclCommAbort.
  decltype(&::ncclCommAbort) CommAbort = nullptr;
  /// ncclCommGetAsyncError.
  decltype(&::ncclCommGetAsyncError) CommGetAsyncError = nullptr;
  /// ncclAllReduce.
  decltype(&::ncclAllReduce) AllReduce = nullptr;
  /// ncclReduceScatter.
  decltype(&::ncclReduceScatter) ReduceScatter = nullptr;
  /// ncclAllGather.
  decltype(&::ncclAllGather) AllGather = nullptr;
  /// ncclBroadcast.
  decltype(&::ncclBroadcast) Broadcast = nullptr;
  /// ncclGetErrorString.
  decltype(&::ncclGetErrorString) GetErrorString = nullptr;
  /// The file the library was loaded from (SharedLibrary::path).
  std::string path;
};

/// The SONAME of the NCCL zerolab was built against: "libnccl.so.<NCCL_MAJOR>".
std::string nccl_soname();

/// Loads `soname` (SharedLibrary::open's search order) and resolves every NcclLibrary member.
/// Throws zl::Error, one line naming the library and what to do, when the library or a function
/// is missing. nccl() is the call to use; this one lets a test name another library.
NcclLibrary load_nccl(const std::string& soname);

/// The process's NCCL table, loaded from nccl_soname() by the first call (thread-safe); a call
/// that throws leaves the next one to try again.
const NcclLibrary& nccl();

}  // namespace zl
