// nccl_library.cpp — libnccl opened on first use and the table of its functions filled in.
#include "comm/nccl/nccl_library.hpp"

#include "ops/cuda/shared_library.hpp"

namespace zl {

std::string nccl_soname() {
  return "libnccl.so." + std::to_string(NCCL_MAJOR);
}

NcclLibrary load_nccl(const std::string& soname) {
  const SharedLibrary library = SharedLibrary::open(
      soname, "NCCL",
      "install NCCL (libnccl2, or the CUDA toolkit's) or add its lib directory to "
      "LD_LIBRARY_PATH, or put the library beside the zerolab binary");
  NcclLibrary table;
  library.resolve(table.GetUniqueId, "ncclGetUniqueId");
  library.resolve(table.CommInitRank, "ncclCommInitRank");
  library.resolve(table.CommDestroy, "ncclCommDestroy");
  library.resolve(table.CommAbort, "ncclCommAbort");
  library.resolve(table.CommGetAsyncError, "ncclCommGetAsyncError");
  library.resolve(table.AllReduce, "ncclAllReduce");
  library.resolve(table.ReduceScatter, "ncclReduceScatter");
  library.resolve(table.AllGather, "ncclAllGather");
  library.resolve(table.Broadcast, "ncclBroadcast");
  library.resolve(table.GetErrorString, "ncclGetErrorString");
  table.path = library.path();
  return table;
}

const NcclLibrary& nccl() {
  static const NcclLibrary table = load_nccl(nccl_soname());
  return table;
}

}  // namespace zl
