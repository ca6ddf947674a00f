// cuda_check.cpp — the one place CUDA and cuBLAS errors, and sizes too large for cuBLAS, become
// zl::Error.
#include "ops/cuda/cuda_check.hpp"

#include <limits>

#include "core/error.hpp"
#include "ops/cuda/cublas_library.hpp"

namespace zl {

void cuda_check(cudaError_t status, const char* call) {
  if (status == cudaSuccess) return;
  fail("CUDA call {} failed: {} ({})", call, cudaGetErrorString(status), cudaGetErrorName(status));
}

void cublas_check(cublasStatus_t status, const char* call) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  fail("cuBLAS call {} failed: {}", call, cublas().GetStatusString(status));
}

int cublas_int(std::int64_t value, const char* what) {
  ZL_CHECK(value >= 0 && value <= std::numeric_limits<int>::max(),
           "{} = {} does not fit cuBLAS's 32-bit sizes: split the product", what, value);
  return static_cast<int>(value);
}

void cuda_check_launch(const char* kernel) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return;
  fail("CUDA kernel {} failed to launch: {} ({})", kernel, cudaGetErrorString(status),
       cudaGetErrorName(status));
}

}  // namespace zl
