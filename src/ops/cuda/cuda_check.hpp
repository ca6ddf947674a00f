// cuda_check.hpp — CUDA runtime and cuBLAS status codes turned into zl::Error: one line naming
// the call that failed and the library's own description of why.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstdint>

namespace zl {

/// Throws zl::Error "CUDA call <call> failed: <cudaGetErrorString> (<error name>)" unless
/// `status` is cudaSuccess.
void cuda_check(cudaError_t status, const char* call);

/// Throws zl::Error "cuBLAS call <call> failed: <cublasGetStatusString>" unless `status` is
/// CUBLAS_STATUS_SUCCESS.
void cublas_check(cublasStatus_t status, const char* call);

/// `value` as one of cuBLAS's 32-bit sizes; throws zl::Error naming `what` when it does not fit.
int cublas_int(std::int64_t value, const char* what);

/// Throws zl::Error naming the first kernel launched by `kernel` that failed to launch (bad
/// configuration, no device), from cudaGetLastError.
void cuda_check_launch(const char* kernel);

}  // namespace zl

/// ZL_CUDA_CHECK(cudaMalloc(&p, n)) throws zl::Error naming the call when it does not succeed.
#define ZL_CUDA_CHECK(call) ::zl::cuda_check((call), #call)

/// ZL_CUBLAS_CHECK(cublasSgemm(...)) throws zl::Error naming the call when it does not succeed.
#define ZL_CUBLAS_CHECK(call) ::zl::cublas_check((call), #call)
