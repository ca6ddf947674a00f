// cuda_device.cpp — CudaDevice's host side: the GPU, stream and cuBLAS handle (its memory is
// cuda_device_memory.cpp's, its step work cuda_device_step.cpp's); copies between host and
// device; the row-major GEMMs through cuBLAS; launches of the kernels in cuda_kernels.cu,
// cuda_layernorm.cu, cuda_cross_entropy.cu and cuda_embedding.cu, with the checks that are CUDA's
// own (cuBLAS's 32-bit sizes, tokens and labels read on the GPU); the checks every device runs are
// ops/device.cpp's. Attention is cuda_device_attention.cpp's.
//
// Row-major through column-major cuBLAS: a row-major X [r, c] is the column-major X^T with
// leading dimension c, so C [M, N] = op(A) op(B) is computed as C^T = op(B)^T op(A)^T, cuBLAS's
// (m, n, k) = (N, M, K) with B first.
#include "ops/cuda/cuda_device.hpp"

#include <cstdio>
#include <cstdlib>
#include <limits>
#include <string_view>
#include <vector>

#include "core/error.hpp"
#include "core/steady_ms.hpp"
#include "ops/check_elems.hpp"
#include "ops/column_sums.hpp"
#include "ops/cuda/adamw_cuda.hpp"
#include "ops/cuda/cublas_library.hpp"
#include "ops/cuda/cuda_check.hpp"
#include "ops/cuda/cuda_kernels.hpp"
#include "optim/grad_norm.hpp"

namespace zl {

namespace {

// cuBLAS's workspace, set explicitly so the ledger check counts it (cuBLAS would otherwise take
// its own, unseen): 32 MiB, what cuBLAS itself recommends for Hopper.
constexpr std::size_t kCublasWorkspaceBytes = std::size_t{32} << 20;

// ZL_CUDA_ATTENTION: exact (or its old name tiled), fast or gemm; unset, Default.
AttentionKind attention_from_environment() {
  const char* value = std::getenv("ZL_CUDA_ATTENTION");
  if (value == nullptr) return AttentionKind::Default;
  const std::string_view name(value);
  if (name == "exact" || name == "tiled") return AttentionKind::Exact;
  if (name == "fast") return AttentionKind::Fast;
  ZL_CHECK(name == "gemm", "ZL_CUDA_ATTENTION is '{}': use exact, fast or gemm", value);
  return AttentionKind::Gemm;
}

// A column sum's chunks are one launch's grid.y (at most 65535).
void check_column_sum_rows(std::int64_t rows) {
  ZL_CHECK(column_sum_chunks(rows) <= 65535,
           "a column sum over {} rows is more than one CUDA launch takes ({} chunks of {}): use a "
           "smaller micro-batch",
           rows, column_sum_chunks(rows), kColumnSumChunkRows);
}

}  // namespace

int CudaDevice::device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no device" so later calls start clean
    return 0;
  }
  return count;
}

CudaDevice::CudaDevice(int device_index)
    : device_index_(device_index), attention_(attention_from_environment()) {
  const int count = device_count();
  ZL_CHECK(device_index >= 0 && device_index < count,
           "CUDA device {} does not exist: this process sees {} GPU(s) (check LOCAL_RANK and "
           "CUDA_VISIBLE_DEVICES)",
           device_index, count);
  select();
  ZL_CUDA_CHECK(cudaFree(nullptr));  // creates the context now, before the baseline is read
  ZL_CUDA_CHECK(cudaStreamCreate(&stream_));
  ZL_CUBLAS_CHECK(cublas().Create(&cublas_));
  ZL_CUBLAS_CHECK(cublas().SetStream(cublas_, stream_));
  // Default math keeps at least the requested precision: fp32 products never drop to TF32, and
  // bf16 and fp16 products (exact in fp32) may use the tensor cores with fp32 accumulation.
  ZL_CUBLAS_CHECK(cublas().SetMathMode(cublas_, CUBLAS_DEFAULT_MATH));
  ZL_CUDA_CHECK(cudaMalloc(&cublas_workspace_, kCublasWorkspaceBytes));
  cublas_workspace_bytes_ = kCublasWorkspaceBytes;
  ZL_CUBLAS_CHECK(cublas().SetWorkspace(cublas_, cublas_workspace_, cublas_workspace_bytes_));
  create_checks();
  ZL_CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&column_counters_), kColumnCounterBytes));
  ZL_CUDA_CHECK(cudaMemset(column_counters_, 0, kColumnCounterBytes));
  ZL_CUDA_CHECK(cudaDeviceSynchronize());
  baseline_used_bytes_ = driver_used_bytes() - static_cast<std::int64_t>(cublas_workspace_bytes_) -
                         static_cast<std::int64_t>(kColumnCounterBytes) -
                         static_cast<std::int64_t>(kCheckSlots * sizeof(unsigned long long));
}

CudaDevice::~CudaDevice() {
  // Destructors do not throw: failures here can only be reported.
  cudaSetDevice(device_index_);
  cudaStreamSynchronize(stream_);
  release_typed_scratch();  // into the cache, which goes next
  free_cache_unchecked();
  if (scratch_ != nullptr) cudaFree(scratch_);
  if (sums_scratch_ != nullptr) cudaFree(sums_scratch_);
  cudaFree(column_counters_);
  destroy_checks();
  destroy_staging();
  if (cublas_ != nullptr) cublas().Destroy(cublas_);
  cudaFree(cublas_workspace_);
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

void CudaDevice::select() const {
  ZL_CUDA_CHECK(cudaSetDevice(device_index_));
}

void CudaDevice::synchronize() {
  select();
  wait_on_host();
}

void CudaDevice::wait_on_host() {
  if (host_wait_guard_) host_wait_guard_();
  const double started_ms = steady_ms();
  // The pending checks' slots come back with the same wait.
  if (!pending_checks_.empty()) {
    ZL_CUDA_CHECK(cudaMemcpyAsync(check_flags_host_, check_flags_,
                                  pending_checks_.size() * sizeof(unsigned long long),
                                  cudaMemcpyDeviceToHost, stream_));
  }
  ZL_CUDA_CHECK(cudaStreamSynchronize(stream_));
  count_host_wait(steady_ms() - started_ms);
  if (!pending_checks_.empty()) report_checks();
}

// ---- GEMMs ----

void CudaDevice::gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n,
                      std::int64_t k, const float* a, const float* b, float* c, float beta) {
  if (m == 0 || n == 0) return;
  select();
  if (k == 0) {  // an empty sum (cuBLAS rejects a leading dimension of 0): C = beta C
    if (beta == 0.0f) {
      ZL_CUDA_CHECK(
          cudaMemsetAsync(c, 0, static_cast<std::size_t>(m * n) * sizeof(float), stream_));
    }
    return;
  }
  if (half_gemms_ != DType::F32) {
    const auto copies =
        half_copies({TensorIn(a, m * k, DType::F32), TensorIn(b, k * n, DType::F32), TensorIn()});
    return matmul_half(half_gemms_, transpose_a, transpose_b, m, n, k, copies[0], copies[1], c,
                       beta);
  }
  const float alpha = 1.0f;
  const int mi = cublas_int(m, "M"), ni = cublas_int(n, "N"), ki = cublas_int(k, "K");
  // C^T [N, M] = op(B)^T op(A)^T; B stored [K, N] (or [N, K] transposed) has leading dim N (K).
  ZL_CUBLAS_CHECK(cublas().Sgemm(cublas_, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N,
                                 transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, ni, mi, ki, &alpha, b,
                                 transpose_b ? ki : ni, a, transpose_a ? mi : ki, &beta, c, ni));
}

void CudaDevice::set_half_gemms(DType half) {
  ZL_CHECK(is_training_dtype(half), "GEMMs run in fp32, bf16 or fp16, not {}", dtype_name(half));
  half_gemms_ = half;
}

std::array<const std::uint16_t*, 3> CudaDevice::half_copies(const std::array<TensorIn, 3>& operands,
                                                            bool reserve_first) {
  const auto aligned = [](std::int64_t elems) { return (elems + 7) / 8 * 8; };  // 16 bytes
  std::int64_t total = 0;
  for (const TensorIn& operand : operands) {
    if (operand.dtype == DType::F32) total += aligned(operand.elems);
  }
  auto* next = static_cast<std::uint16_t*>(
      scratch(static_cast<std::size_t>(total) * sizeof(std::uint16_t)));
  std::array<const std::uint16_t*, 3> copies{};
  for (std::size_t i = 0; i < operands.size(); ++i) {
    const TensorIn& operand = operands[i];
    ZL_CHECK(operand.dtype == DType::F32 || operand.dtype == half_gemms_,
             "a {} product takes fp32 or {} operands, not {}", dtype_name(half_gemms_),
             dtype_name(half_gemms_), dtype_name(operand.dtype));
    if (operand.dtype == half_gemms_) {
      copies[i] = static_cast<const std::uint16_t*>(operand.data);
      continue;
    }
    if (i > 0 || !reserve_first)
      convert(operand.data, DType::F32, next, half_gemms_, operand.elems);
    copies[i] = next;
    next += aligned(operand.elems);
  }
  return copies;
}

void CudaDevice::matmul_half(DType half, bool transpose_a, bool transpose_b, std::int64_t m,
                             std::int64_t n, std::int64_t k, const std::uint16_t* a,
                             const std::uint16_t* b, float* c, float beta) {
  ZL_CHECK(k >= 1, "matmul_half: K = {} is empty: pass K >= 1", k);
  ZL_CHECK(cuda::is_half(half), "matmul_half multiplies bf16 or fp16 operands, not {}",
           dtype_name(half));
  const cudaDataType_t operands = half == DType::BF16 ? CUDA_R_16BF : CUDA_R_16F;
  if (m == 0 || n == 0) return;
  select();
  const float alpha = 1.0f;
  const int mi = cublas_int(m, "M"), ni = cublas_int(n, "N"), ki = cublas_int(k, "K");
  ZL_CUBLAS_CHECK(cublas().GemmEx(
      cublas_, transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, transpose_a ? CUBLAS_OP_T : CUBLAS_OP_N, ni,
      mi, ki, &alpha, b, operands, transpose_b ? ki : ni, a, operands, transpose_a ? mi : ki, &beta,
      c, CUDA_R_32F, ni, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

void CudaDevice::do_linear_forward(std::span<const float> x, std::span<const float> w,
                                   std::span<const float> b, std::span<float> y, std::int64_t rows,
                                   std::int64_t in, std::int64_t out) {
  // y [rows, out] = x [rows, in] * w^T (w stored [out, in])
  gemm(false, true, rows, out, in, x.data(), w.data(), y.data(), 0.0f);
  if (!b.empty()) cuda::add_bias_rows(y.data(), b.data(), rows, out, stream_);
}

void CudaDevice::do_linear_backward(std::span<const float> x, std::span<const float> w,
                                    std::span<const float> dy, std::span<float> dw,
                                    std::span<float> db, std::span<float> dx, std::int64_t rows,
                                    std::int64_t in, std::int64_t out) {
  if (half_gemms_ != DType::F32 && rows > 0 && in > 0 && out > 0) {
    return half_backward(false, x, w, dy, dw, db, dx, rows, in, out);
  }
  // dw [out, in] += dy^T (dy stored [rows, out]) * x [rows, in]
  gemm(true, false, out, in, rows, dy.data(), x.data(), dw.data(), 1.0f);
  if (!db.empty()) column_sums(dy.data(), db.data(), rows, out);
  // dx [rows, in] = dy [rows, out] * w [out, in]
  if (!dx.empty()) gemm(false, false, rows, in, out, dy.data(), w.data(), dx.data(), 0.0f);
}

void CudaDevice::do_conv1d_forward(std::span<const float> x, std::span<const float> w,
                                   std::span<const float> b, std::span<float> y, std::int64_t rows,
                                   std::int64_t in, std::int64_t out) {
  // y [rows, out] = x [rows, in] * w [in, out]
  gemm(false, false, rows, out, in, x.data(), w.data(), y.data(), 0.0f);
  cuda::add_bias_rows(y.data(), b.data(), rows, out, stream_);
}

void CudaDevice::do_conv1d_backward(std::span<const float> x, std::span<const float> w,
                                    std::span<const float> dy, std::span<float> dw,
                                    std::span<float> db, std::span<float> dx, std::int64_t rows,
                                    std::int64_t in, std::int64_t out) {
  if (half_gemms_ != DType::F32 && rows > 0 && in > 0 && out > 0) {
    return half_backward(true, x, w, dy, dw, db, dx, rows, in, out);
  }
  // dw [in, out] += x^T (x stored [rows, in]) * dy [rows, out]
  gemm(true, false, in, out, rows, x.data(), dy.data(), dw.data(), 1.0f);
  column_sums(dy.data(), db.data(), rows, out);
  // dx [rows, in] = dy [rows, out] * w^T (w stored [in, out])
  if (!dx.empty()) gemm(false, true, rows, in, out, dy.data(), w.data(), dx.data(), 0.0f);
}

// ---- memory ----

void CudaDevice::copy_from_host(void* device, const void* host, std::size_t bytes) {
  if (bytes == 0) return;
  select();
  if (bytes <= kStagingMaxBytes) {
    upload_staged(device, host, bytes);  // `host` is copied: the caller may reuse it
    return;
  }
  ZL_CUDA_CHECK(cudaMemcpyAsync(device, host, bytes, cudaMemcpyHostToDevice, stream_));
  synchronize();  // the copy has read `host`: the caller may reuse it
}

void CudaDevice::copy_to_host(void* host, const void* device, std::size_t bytes) {
  if (bytes == 0) return;
  select();
  ZL_CUDA_CHECK(cudaMemcpyAsync(host, device, bytes, cudaMemcpyDeviceToHost, stream_));
  synchronize();  // complete on return
}

void CudaDevice::copy(void* to, const void* from, std::size_t bytes) {
  if (bytes == 0 || to == from) return;
  select();
  ZL_CUDA_CHECK(cudaMemcpyAsync(to, from, bytes, cudaMemcpyDeviceToDevice, stream_));
}

void CudaDevice::fill_zero(void* device, std::size_t bytes) {
  if (bytes == 0) return;
  select();
  ZL_CUDA_CHECK(cudaMemsetAsync(device, 0, bytes, stream_));
}

// ---- elementwise ----

void CudaDevice::do_gelu_forward(std::span<const float> x, std::span<float> y) {
  select();
  cuda::gelu_forward(x.data(), y.data(), static_cast<std::int64_t>(x.size()), stream_);
}

void CudaDevice::do_gelu_backward(std::span<const float> x, std::span<const float> dy,
                                  std::span<float> dx) {
  select();
  cuda::gelu_backward(x.data(), dy.data(), dx.data(), static_cast<std::int64_t>(x.size()), stream_);
}

void CudaDevice::do_gelu_tanh_forward(std::span<const float> x, std::span<float> y) {
  select();
  cuda::gelu_tanh_forward(x.data(), y.data(), static_cast<std::int64_t>(x.size()), stream_);
}

void CudaDevice::do_gelu_tanh_backward(std::span<const float> x, std::span<const float> dy,
                                       std::span<float> dx) {
  select();
  cuda::gelu_tanh_backward(x.data(), dy.data(), dx.data(), static_cast<std::int64_t>(x.size()),
                           stream_);
}

// ---- loss and embeddings ----

double* CudaDevice::cross_entropy_rows(std::span<const float> logits,
                                       std::span<const std::int64_t> labels,
                                       std::span<float> dlogits, std::int64_t rows,
                                       std::int64_t classes, std::int64_t padded_classes,
                                       std::int64_t mean_rows) {
  select();
  auto* row_losses = static_cast<double*>(scratch(static_cast<std::size_t>(rows) * sizeof(double)));
  cuda::cross_entropy(logits.data(), labels.data(), dlogits.data(), row_losses,
                      check_slot({"cross_entropy", labels.data(), 0, classes}), rows, classes,
                      padded_classes, mean_rows, stream_);
  return row_losses;
}

double CudaDevice::do_cross_entropy_forward_backward(
    std::span<const float> logits, std::span<const std::int64_t> labels, std::span<float> dlogits,
    std::int64_t rows, std::int64_t classes, std::int64_t padded_classes, std::int64_t mean_rows) {
  const double* row_losses =
      cross_entropy_rows(logits, labels, dlogits, rows, classes, padded_classes, mean_rows);
  std::vector<double> host_losses(static_cast<std::size_t>(rows));
  ZL_CUDA_CHECK(cudaMemcpyAsync(host_losses.data(), row_losses, host_losses.size() * sizeof(double),
                                cudaMemcpyDeviceToHost, stream_));
  wait_on_host();  // host_losses is ready; a bad label throws here
  // The row losses summed in row order in double, as CpuDevice does.
  double loss_sum = 0.0;
  for (const double row_loss : host_losses) loss_sum += row_loss;
  return loss_sum;
}

void CudaDevice::do_cross_entropy_add_forward_backward(
    std::span<const float> logits, std::span<const std::int64_t> labels, std::span<float> dlogits,
    std::int64_t rows, std::int64_t classes, std::int64_t padded_classes, std::int64_t mean_rows,
    std::span<double> loss_sum) {
  const double* row_losses =
      cross_entropy_rows(logits, labels, dlogits, rows, classes, padded_classes, mean_rows);
  cuda::add_row_losses(row_losses, rows, loss_sum.data(), stream_);
}

void CudaDevice::do_add_mean_loss(std::span<const double> loss_sum, std::int64_t rows,
                                  std::span<float> total) {
  select();
  cuda::add_mean_loss(loss_sum.data(), rows, total.data(), stream_);
}

void CudaDevice::do_embedding_forward(std::span<const std::int64_t> tokens,
                                      std::span<const float> wte, std::span<const float> wpe,
                                      std::span<float> x, std::int64_t batch, std::int64_t seq_len,
                                      std::int64_t channels, std::int64_t vocab) {
  select();
  cuda::embedding_forward(tokens.data(), wte.data(), wpe.data(), x.data(), batch, seq_len, channels,
                          vocab, check_slot({"embedding_forward", tokens.data(), seq_len, vocab}),
                          stream_);
}

void CudaDevice::do_embedding_backward(std::span<const std::int64_t> tokens,
                                       std::span<const float> dx, std::span<float> dwte,
                                       std::span<float> dwpe, std::int64_t batch,
                                       std::int64_t seq_len, std::int64_t channels,
                                       std::int64_t vocab) {
  select();
  const std::int64_t rows = batch * seq_len;
  ZL_CHECK(rows < std::numeric_limits<std::int32_t>::max(),
           "embedding_backward: {} token rows are more than the CUDA kernels index: use a smaller "
           "micro-batch",
           rows);
  auto* links = static_cast<std::int32_t*>(
      scratch(static_cast<std::size_t>(2 * rows) * sizeof(std::int32_t)));
  cuda::embedding_backward(
      tokens.data(), dx.data(), dwte.data(), dwpe.data(), links, batch, seq_len, channels, vocab,
      check_slot({"embedding_backward", tokens.data(), seq_len, vocab}), stream_);
}

// ---- LayerNorm (attention: cuda_device_attention.cpp) ----

void CudaDevice::do_layernorm_forward(std::span<const float> x, std::span<const float> weight,
                                      std::span<const float> bias, std::span<float> y,
                                      std::span<float> mean, std::span<float> rstd,
                                      std::int64_t rows, std::int64_t channels) {
  select();
  cuda::layernorm_forward(x.data(), weight.data(), bias.data(), y.data(), mean.data(), rstd.data(),
                          rows, channels, stream_);
}

void CudaDevice::do_layernorm_backward(std::span<const float> x, std::span<const float> weight,
                                       std::span<const float> mean, std::span<const float> rstd,
                                       std::span<const float> dy, std::span<float> dx,
                                       std::span<float> dweight, std::span<float> dbias,
                                       std::int64_t rows, std::int64_t channels) {
  select();
  cuda::layernorm_backward(x.data(), weight.data(), mean.data(), rstd.data(), dy.data(), dx.data(),
                           dweight.data(), dbias.data(), layernorm_partials(rows, channels),
                           column_counters(channels), rows, channels, stream_);
}

double* CudaDevice::layernorm_partials(std::int64_t rows, std::int64_t channels) {
  check_column_sum_rows(rows);
  return static_cast<double*>(sums_scratch(
      static_cast<std::size_t>(2 * column_sum_chunks(rows) * channels) * sizeof(double)));
}

void CudaDevice::column_sums(const float* dy, float* db, std::int64_t rows, std::int64_t cols,
                             void* rounded, DType rounded_dtype) {
  check_column_sum_rows(rows);
  auto* partials = static_cast<float*>(
      sums_scratch(static_cast<std::size_t>(column_sum_chunks(rows) * cols) * sizeof(float)));
  cuda::for_half(rounded_dtype, [&]<class H>() {
    cuda::add_column_sums(dy, db, static_cast<H*>(rounded), partials, column_counters(cols), rows,
                          cols, stream_);
  });
}

unsigned* CudaDevice::column_counters(std::int64_t cols) const {
  const std::int64_t groups = cuda::column_sum_groups(cols);
  ZL_CHECK(groups <= kColumnCounters,
           "CUDA column sums take at most {} columns, not {}: raise CudaDevice::kColumnCounters",
           kColumnCounters * cuda::kColumnSumGroupColumns, cols);
  return column_counters_;
}

}  // namespace zl
