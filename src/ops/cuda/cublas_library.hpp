// cublas_library.hpp — the cuBLAS functions zerolab calls, looked up in libcublas on first use
// (dlopen, shared_library.hpp) instead of linked: `cublas().Sgemm(handle, ...)`. The header still
// gives the types; the library is mapped only by a process that makes a cuBLAS handle.
#pragma once

#include <cublas_v2.h>

#include <string>

namespace zl {

/// cublasGemmEx, the exported C function (compute type a cublasComputeType_t). C++ also sees an
/// inline overload taking the old cudaDataType compute type, so decltype(&cublasGemmEx) would be
/// ambiguous; cublas_library.cpp checks this type selects the exported one.
using CublasGemmEx = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int,
                                        int, int, const void*, const void*, cudaDataType, int,
                                        const void*, cudaDataType, int, const void*, void*,
                                        cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);

/// The cuBLAS entry points zerolab uses, each pointing into the loaded library. Members are named
/// after the header's names without the prefix; each is the exported function the header's name
/// stands for (cublasCreate is a macro for cublasCreate_v2).
struct CublasLibrary {
  /// cublasCreate (exported as cublasCreate_v2).
  decltype(&::cublasCreate_v2) Create = nullptr;
  /// cublasDestroy (exported as cublasDestroy_v2).
  decltype(&::cublasDestroy_v2) Destroy = nullptr;
  /// cublasGemmEx.
  CublasGemmEx GemmEx = nullptr;
  /// cublasGetStatusString.
  decltype(&::cublasGetStatusString) GetStatusString = nullptr;
  /// cublasSetMathMode.
  decltype(&::cublasSetMathMode) SetMathMode = nullptr;
  /// cublasSetStream (exported as cublasSetStream_v2).
  decltype(&::cublasSetStream_v2) SetStream = nullptr;
  /// cublasSetWorkspace (exported as cublasSetWorkspace_v2).
  decltype(&::cublasSetWorkspace_v2) SetWorkspace = nullptr;
  /// cublasSgemm (exported as cublasSgemm_v2).
  decltype(&::cublasSgemm_v2) Sgemm = nullptr;
  /// cublasSgemmStridedBatched.
  decltype(&::cublasSgemmStridedBatched) SgemmStridedBatched = nullptr;
  /// The file the library was loaded from (SharedLibrary::path).
  std::string path;
};

/// The SONAME of the cuBLAS zerolab was built against: "libcublas.so.<CUBLAS_VER_MAJOR>".
std::string cublas_soname();

/// Loads `soname` (SharedLibrary::open's search order) and resolves every CublasLibrary member.
/// Throws zl::Error, one line naming the library and what to do, when the library or a function
/// is missing. cublas() is the call to use; this one lets a test name another library.
CublasLibrary load_cublas(const std::string& soname);

/// The process's cuBLAS table, loaded from cublas_soname() by the first call (thread-safe); a call
/// that throws leaves the next one to try again.
const CublasLibrary& cublas();

}  // namespace zl
