// cublas_library.cpp — libcublas opened on first use and the table of its functions filled in.
#include "ops/cuda/cublas_library.hpp"

#include <type_traits>

#include "ops/cuda/shared_library.hpp"

namespace zl {

// The cast picks the overload whose type is CublasGemmEx: it fails to compile unless the header
// declares the exported function with exactly that type.
static_assert(std::is_same_v<decltype(static_cast<CublasGemmEx>(&::cublasGemmEx)), CublasGemmEx>);

std::string cublas_soname() {
  return "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
}

CublasLibrary load_cublas(const std::string& soname) {
  const SharedLibrary library = SharedLibrary::open(
      soname, "cuBLAS",
      "install the CUDA toolkit's cuBLAS or add its lib directory to LD_LIBRARY_PATH");
  CublasLibrary table;
  library.resolve(table.Create, "cublasCreate_v2");
  library.resolve(table.Destroy, "cublasDestroy_v2");
  library.resolve(table.GemmEx, "cublasGemmEx");
  library.resolve(table.GetStatusString, "cublasGetStatusString");
  library.resolve(table.SetMathMode, "cublasSetMathMode");
  library.resolve(table.SetStream, "cublasSetStream_v2");
  library.resolve(table.SetWorkspace, "cublasSetWorkspace_v2");
  library.resolve(table.Sgemm, "cublasSgemm_v2");
  library.resolve(table.SgemmStridedBatched, "cublasSgemmStridedBatched");
  table.path = library.path();
  return table;
}

const CublasLibrary& cublas() {
  static const CublasLibrary table = load_cublas(cublas_soname());
  return table;
}

}  // namespace zl
