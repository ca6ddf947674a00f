// cuda_device.hpp — the CUDA Device: cudaMalloc'd memory booked per category in the rank's
// ledger, GEMMs through cuBLAS (fp32, and bf16 or fp16 inputs with fp32 accumulation) and every
// other kernel of the Device table as a hand-written CUDA kernel (cuda_kernels.cu,
// cuda_layernorm.cu, cuda_cross_entropy.cu, cuda_embedding.cu, the attention's .cu files, and the
// step work's cuda_step_kernels.cu and adamw_cuda.cu). The spans the kernels take hold device
// pointers: they are passed to kernels, never read on the host. All work goes, in order, on the
// device's one compute stream; a kernel that must answer on the host (a loss it returns) waits for
// it, and a bad token or label is reported at the next host wait (cuda_device_checks.cpp).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string_view>
#include <vector>

#include "ops/cuda/adamw_cuda.hpp"
#include "ops/device.hpp"

namespace zl {

/// The device bytes a MemoryLedger books, set beside what the CUDA driver reports.
struct DeviceMemoryCheck {
  std::int64_t ledger_bytes = 0;  ///< bytes the ledger holds now, over all categories
  /// The device's own bytes: cuBLAS workspace, kernel scratch (Device::typed_scratch_bytes
  /// included), cached blocks.
  std::int64_t internal_bytes = 0;
  std::int64_t allocations = 0;  ///< live cudaMalloc allocations: buffers, cached blocks, scratch
  /// Device bytes in use now (cudaMemGetInfo: total - free) minus those in use when this device
  /// was made: what this device (and anything else on the GPU since) has taken.
  std::int64_t driver_used_bytes = 0;
  /// Bytes by which one allocation may differ from the driver's count: rounded up to its 2 MiB
  /// page, or, for a small one, placed in a page the driver had already taken (then it adds
  /// nothing).
  static constexpr std::int64_t kPageBytes = std::int64_t{2} << 20;
  /// Bytes the runtime may take on its own after this device was made (kernel modules loaded on
  /// their first launch, cuBLAS handles), allowed on top of the pages.
  static constexpr std::int64_t kRuntimeSlackBytes = std::int64_t{256} << 20;
  /// True when the driver's count is within one page per allocation of the ledger plus the
  /// scratch, or above it by no more than that and the runtime's slack.
  bool consistent() const {
    const std::int64_t booked = ledger_bytes + internal_bytes;
    const std::int64_t pages = allocations * kPageBytes;
    return driver_used_bytes >= booked - pages &&
           driver_used_bytes <= booked + pages + kRuntimeSlackBytes;
  }
};

/// GPU memory and kernels of one rank on one CUDA device. Not thread-safe: one CudaDevice per
/// rank (and per host thread: the constructor and every call select its GPU).
class CudaDevice final : public Device {
 public:
  /// Selects GPU `device_index`, creates the compute stream and a cuBLAS handle on it. Throws
  /// zl::Error when there is no such GPU.
  explicit CudaDevice(int device_index = 0);
  ~CudaDevice() override;
  CudaDevice(const CudaDevice&) = delete;
  CudaDevice& operator=(const CudaDevice&) = delete;

  /// Number of CUDA GPUs visible to this process; 0 (never an error) when there is no driver or
  /// no GPU, so tests can skip.
  static int device_count();

  /// `bytes` zeroed device bytes (a memset on the compute stream): a cached block of exactly that
  /// size when deallocate kept one, else a new cudaMalloc (after giving the cache back to the
  /// driver, when the GPU is full). A model books the same activation sizes every micro-batch,
  /// so after the first one no step calls cudaMalloc or cudaFree.
  void* allocate(std::size_t bytes) override;
  /// allocate without the memset: the buffer's previous bytes, for one written whole first.
  void* allocate_unset(std::size_t bytes) override;
  /// Keeps the block for the next allocate of the same size (as PyTorch's caching allocator
  /// does) without waiting: the compute stream orders its reuse after every kernel queued before
  /// the free, and an event recorded on each side stream (add_side_stream) orders it after their
  /// work too. Never throws (it runs in destructors): a failure is printed to stderr and the
  /// block given back with cudaFree, which waits for the device.
  void deallocate(void* ptr, std::size_t bytes) override;
  /// Registers a stream other than stream() that may read or write this device's buffers (a
  /// communication stream), so that a block freed while its work is queued is not reused before
  /// that work is done. The stream must outlive its registration.
  void add_side_stream(cudaStream_t stream);
  /// Undoes add_side_stream (blocks freed before keep their events).
  void remove_side_stream(cudaStream_t stream);
  /// Runs `guard` before every host wait on the compute stream (synchronize, the reads that wait
  /// for it, a scratch reallocation). A communicator whose collectives the stream waits on
  /// watches them there, so a rank whose peer is gone fails with the watchdog's one line instead
  /// of waiting forever. An empty function removes it.
  void set_host_wait_guard(std::function<void()> guard) { host_wait_guard_ = std::move(guard); }
  /// Gives every cached block back to the driver (torch.cuda.empty_cache()).
  void release_cache();
  /// Bytes in cached blocks: held from the driver, booked in no ledger category.
  std::int64_t cached_bytes() const;

  /// The CUDA device index this rank uses.
  int device_index() const { return device_index_; }
  /// The stream every kernel of this device runs on (a blocking stream: legacy default-stream
  /// copies such as a plain cudaMemcpy are ordered with it).
  cudaStream_t stream() const { return stream_; }
  /// Blocks the host until all work queued on the compute stream is done.
  void synchronize() override;
  /// The ledger, the device's scratch and the driver's count of used bytes, read now (after a
  /// synchronize).
  DeviceMemoryCheck memory_check();
  /// Throws zl::Error with the numbers of memory_check() unless it is consistent().
  void check_memory_ledger();

  /// With `half` BF16 or F16, every GEMM of the Device table (Linear, Conv1D, the LM head) rounds
  /// its fp32 operands to that format (nearest even, into device scratch), takes operands kept in
  /// it as they are, and multiplies them with matmul_half: tensor cores with fp32 accumulation,
  /// as torch.autocast(dtype=torch.bfloat16 or torch.float16) runs them; attention takes the
  /// fast kernels where they fit, their tiles in the same format (attention_tiles). F32 (the
  /// default): GEMMs are fp32 without TF32. Results differ from the CPU's by the rounding of the
  /// operands. Throws zl::Error for another dtype.
  void set_half_gemms(DType half);
  /// The attention kernels to run (AttentionKind); a kind other than Default is a request: Fast
  /// on a head size it does not take is refused at the first attention call. Made with
  /// ZL_CUDA_ATTENTION's kind (exact, tiled = exact, fast or gemm), else Default.
  void set_attention(AttentionKind kind) { attention_ = kind; }
  /// The kernels attention runs on for head size `head_dim`: Exact, Fast or Gemm.
  AttentionKind attention_for(std::int64_t head_dim) const;
  /// The 16-bit format of the fast attention's tiles: the GEMMs' (set_half_gemms) when they are
  /// 16-bit, bf16 when they are fp32.
  DType attention_tiles() const { return half_gemms_ == DType::F16 ? DType::F16 : DType::BF16; }

  /// Row-major C[M, N] = op(A)[M, K] op(B)[K, N] + beta C with A and B in `half` (BF16 or F16:
  /// bit patterns as zerolab stores them), fp32 C and fp32 accumulation (cublasGemmEx,
  /// CUBLAS_COMPUTE_32F). op(A) = A [M, K] unless `transpose_a` (then A is stored [K, M]);
  /// likewise B.
  void matmul_half(DType half, bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n,
                   std::int64_t k, const std::uint16_t* a, const std::uint16_t* b, float* c,
                   float beta);

  // ---- memory and step work (semantics: ops/device.hpp), queued in order on the compute
  // stream. Copies are cudaMemcpyAsync / cudaMemsetAsync; the step kernels are
  // cuda_step_kernels.cu, one IEEE-rounded operation per element, so they give CpuDevice's bits
  // (a NaN produced by arithmetic may carry another payload than the host's). ----

  /// Copies on the compute stream and waits for it, so `host` may be reused on return.
  void copy_from_host(void* device, const void* host, std::size_t bytes) override;
  /// Copies on the compute stream (after the work queued before) and waits for it.
  void copy_to_host(void* host, const void* device, std::size_t bytes) override;
  /// A device-to-device copy queued on the compute stream.
  void copy(void* to, const void* from, std::size_t bytes) override;
  /// A memset queued on the compute stream.
  void fill_zero(void* device, std::size_t bytes) override;
  /// A kernel between fp32, bf16 and fp16 (core/dtype.hpp's bits, NaN included), or a copy for
  /// the same dtype. Throws zl::Error for any other dtype.
  void convert(const void* in, DType in_dtype, void* out, DType out_dtype,
               std::int64_t elems) override;
  /// fp32, bf16 or fp16 (throws zl::Error for another dtype).
  void add(void* acc, const void* addend, DType dtype, std::int64_t elems) override;
  void scale(std::span<float> x, float factor) override;
  void divide(std::span<float> x, float divisor) override;
  /// fp32, bf16 or fp16 (throws zl::Error for another dtype); fp32 leaves x as it is.
  void round_to(std::span<float> x, DType dtype) override;
  /// One thread per block sums in the host's order; the partials come back to the host (waits
  /// for the stream). Throws zl::Error unless `grads` is whole blocks.
  void block_sumsq(std::span<const float> grads, std::span<double> partials) override;
  /// adamw_update_cuda (adamw_cuda.hpp) on one tensor, without a 16-bit copy. Throws zl::Error
  /// unless the four spans have the same size.
  /// For a bf16 or fp16 copy, one pass of adamw_update_cuda that writes the copy as it updates
  /// (its params_half); an fp32 copy takes Device's two calls.
  void adamw_update_rounded(std::span<float> master, std::span<const float> grads,
                            std::span<float> exp_avg, std::span<float> exp_avg_sq,
                            const AdamWScalars& scalars, void* rounded,
                            DType rounded_dtype) override;
  void adamw_update(std::span<float> params, std::span<const float> grads, std::span<float> exp_avg,
                    std::span<float> exp_avg_sq, const AdamWScalars& scalars) override;

 protected:
  /// One thread per block reads fp32, bf16 or fp16 gradients as they are, dividing each by the
  /// loss scale.
  void do_block_sumsq_unscaled(TensorIn grads, float divisor, std::span<double> partials) override;
  /// One block per cover node (cuda_tree_sum.cuh).
  void do_tree_cover_sums(std::span<const double> leaves, std::int64_t first_leaf,
                          std::span<double> sums) override;
  /// One pass of adamw_update_cuda that reads fp32, bf16 or fp16 gradients as they are, unscales
  /// and clips each, and writes a 16-bit copy as it updates (a copy in fp32, or in the other
  /// 16-bit format than the gradients', is a conversion after).
  void do_adamw_update_unscaled(std::span<float> master, TensorIn grads, float divisor, float clip,
                                std::span<float> exp_avg, std::span<float> exp_avg_sq,
                                const AdamWScalars& scalars, void* rounded,
                                DType rounded_dtype) override;

  // ---- the Device table (semantics: ops/device.hpp), called once Device has checked the
  // arguments. GEMMs are cuBLAS fp32 (no TF32); the other kernels compute in double where the CPU
  // does, so results agree with CpuDevice to rounding (tests/gpu states the tolerances). ----

  void do_linear_forward(std::span<const float> x, std::span<const float> w,
                         std::span<const float> b, std::span<float> y, std::int64_t rows,
                         std::int64_t in, std::int64_t out) override;
  void do_linear_backward(std::span<const float> x, std::span<const float> w,
                          std::span<const float> dy, std::span<float> dw, std::span<float> db,
                          std::span<float> dx, std::int64_t rows, std::int64_t in,
                          std::int64_t out) override;
  void do_gelu_forward(std::span<const float> x, std::span<float> y) override;
  void do_gelu_backward(std::span<const float> x, std::span<const float> dy,
                        std::span<float> dx) override;
  /// One block per row; the row losses come back to the host and are summed in row order in
  /// double, as on the CPU. Waits for the stream.
  double do_cross_entropy_forward_backward(std::span<const float> logits,
                                           std::span<const std::int64_t> labels,
                                           std::span<float> dlogits, std::int64_t rows,
                                           std::int64_t classes, std::int64_t padded_classes,
                                           std::int64_t mean_rows) override;
  /// One block per row, then one thread adds the row losses, in row order in double, onto
  /// loss_sum[0]: no host wait. A bad label is reported at the next host wait.
  /// One thread (cuda::add_mean_loss).
  void do_add_mean_loss(std::span<const double> loss_sum, std::int64_t rows,
                        std::span<float> total) override;
  void do_cross_entropy_add_forward_backward(std::span<const float> logits,
                                             std::span<const std::int64_t> labels,
                                             std::span<float> dlogits, std::int64_t rows,
                                             std::int64_t classes, std::int64_t padded_classes,
                                             std::int64_t mean_rows,
                                             std::span<double> loss_sum) override;
  /// A bad token is skipped and reported at the next host wait (zl::Error, as on the CPU).
  void do_embedding_forward(std::span<const std::int64_t> tokens, std::span<const float> wte,
                            std::span<const float> wpe, std::span<float> x, std::int64_t batch,
                            std::int64_t seq_len, std::int64_t channels,
                            std::int64_t vocab) override;
  /// A token's rows are linked in order and one block per distinct token adds them
  /// (cuda_embedding.cuh), so a repeated token gets its rows added in the CPU's order. A bad token
  /// is reported at the next host wait.
  void do_embedding_backward(std::span<const std::int64_t> tokens, std::span<const float> dx,
                             std::span<float> dwte, std::span<float> dwpe, std::int64_t batch,
                             std::int64_t seq_len, std::int64_t channels,
                             std::int64_t vocab) override;
  void do_layernorm_forward(std::span<const float> x, std::span<const float> weight,
                            std::span<const float> bias, std::span<float> y, std::span<float> mean,
                            std::span<float> rstd, std::int64_t rows,
                            std::int64_t channels) override;
  void do_layernorm_backward(std::span<const float> x, std::span<const float> weight,
                             std::span<const float> mean, std::span<const float> rstd,
                             std::span<const float> dy, std::span<float> dx,
                             std::span<float> dweight, std::span<float> dbias, std::int64_t rows,
                             std::int64_t channels) override;
  void do_conv1d_forward(std::span<const float> x, std::span<const float> w,
                         std::span<const float> b, std::span<float> y, std::int64_t rows,
                         std::int64_t in, std::int64_t out) override;
  void do_conv1d_backward(std::span<const float> x, std::span<const float> w,
                          std::span<const float> dy, std::span<float> dw, std::span<float> db,
                          std::span<float> dx, std::int64_t rows, std::int64_t in,
                          std::int64_t out) override;
  void do_gelu_tanh_forward(std::span<const float> x, std::span<float> y) override;
  void do_gelu_tanh_backward(std::span<const float> x, std::span<const float> dy,
                             std::span<float> dx) override;

  // ---- on 16-bit tensors (cuda_device_typed.cpp): a GEMM operand in the GEMMs' format (bf16 or
  // fp16) goes to the tensor cores as it is kept and a 16-bit output is rounded once; the other
  // kernels read and write bf16 or fp16 themselves (the fast attention in its tiles' format),
  // with Device's bits ----

  void do_linear_forward_typed(TensorIn x, TensorIn w, TensorIn b, TensorOut y, std::int64_t rows,
                               std::int64_t in, std::int64_t out) override;
  void do_linear_backward_typed(TensorIn x, TensorIn w, TensorIn dy, std::span<float> dw,
                                std::span<float> db, std::span<float> dx, std::int64_t rows,
                                std::int64_t in, std::int64_t out) override;
  /// bf16 or fp16 tables read as they are kept.
  void do_embedding_forward_typed(std::span<const std::int64_t> tokens, TensorIn wte, TensorIn wpe,
                                  std::span<float> x, std::int64_t batch, std::int64_t seq_len,
                                  std::int64_t channels, std::int64_t vocab) override;
  /// 16-bit weight and bias, and a y in their format or fp32 (or fp32 weights and a 16-bit y).
  void do_layernorm_forward_typed(std::span<const float> x, TensorIn weight, TensorIn bias,
                                  TensorOut y, std::span<float> mean, std::span<float> rstd,
                                  std::int64_t rows, std::int64_t channels) override;
  /// A bf16 or fp16 weight read as it is kept.
  void do_layernorm_backward_typed(std::span<const float> x, TensorIn weight,
                                   std::span<const float> mean, std::span<const float> rstd,
                                   std::span<const float> dy, std::span<float> dx,
                                   std::span<float> dweight, std::span<float> dbias,
                                   std::int64_t rows, std::int64_t channels) override;
  void do_conv1d_forward_typed(TensorIn x, TensorIn w, TensorIn b, TensorOut y, std::int64_t rows,
                               std::int64_t in, std::int64_t out) override;
  void do_conv1d_backward_typed(TensorIn x, TensorIn w, std::span<const float> dy,
                                std::span<float> dw, std::span<float> db, std::span<float> dx,
                                std::int64_t rows, std::int64_t in, std::int64_t out) override;
  void do_gelu_tanh_forward_typed(TensorIn x, TensorOut y) override;
  void do_gelu_tanh_backward_typed(TensorIn x, std::span<const float> dy,
                                   std::span<float> dx) override;
  /// One block per row on bf16 or fp16 logits and dlogits (in place or not), the scale applied
  /// before the rounding; the row losses added on the device as the fp32 kernel's.
  void do_cross_entropy_add_forward_backward_typed(
      TensorIn logits, std::span<const std::int64_t> labels, TensorOut dlogits, std::int64_t rows,
      std::int64_t classes, std::int64_t padded_classes, std::int64_t mean_rows,
      std::span<double> loss_sum, float grad_scale) override;
  /// The fast kernels on bf16 qkv and out; the exact and gemm kinds take Device's default.
  void do_attention_forward_typed(TensorIn qkv, std::span<float> stats, TensorOut out,
                                  std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                                  std::int64_t heads) override;
  /// The fast kernels on bf16 qkv and out; the exact and gemm kinds take Device's default.
  void do_attention_backward_typed(TensorIn qkv, std::span<const float> stats, TensorIn out,
                                   std::span<const float> dout, std::span<float> dqkv,
                                   std::int64_t batch, std::int64_t seq_len, std::int64_t channels,
                                   std::int64_t heads) override;
  /// Fast (attention_for): on the tensor cores (cuda_fast_attention.cu), no T x T scratch.
  /// Exact: in tiles, flash-attention style, with no T x T scratch, the CPU's bits
  /// (cuda_tiled_attention.cu; head size at most 256). Gemm:
  /// per batch element b in device scratch of heads * T * T floats (not kept): the scores
  /// q kᵀ / sqrt(D) of every head by one strided-batched fp32 cuBLAS GEMM, the causal softmax in
  /// place writing each row's stats (one warp per row, sums in double, cuda_attention.cu), then
  /// out = probs v by a second batched GEMM into the heads' channels of out.
  void do_attention_forward(std::span<const float> qkv, std::span<float> stats,
                            std::span<float> out, std::int64_t batch, std::int64_t seq_len,
                            std::int64_t channels, std::int64_t heads) override;
  /// Fast and Exact: dq (with each row's delta_t = dout_t . out_t, in device scratch of
  /// batch * heads * T floats) by one kernel per query tile, then dk and dv by one per key tile,
  /// no atomics. Gemm (which does not read out): per batch element b in
  /// device scratch of 2 * heads * T * T floats: probs rebuilt (the scores GEMM again, then
  /// exp(score - m) / l from the stats), dprobs = dout vᵀ (batched GEMM), the softmax backward in
  /// place into dscores, then dq = dscores k / sqrt(D), dk = dscoresᵀ q / sqrt(D) and dv = probsᵀ
  /// dout by three batched GEMMs into dqkv.
  void do_attention_backward(std::span<const float> qkv, std::span<const float> stats,
                             std::span<const float> out, std::span<const float> dout,
                             std::span<float> dqkv, std::int64_t batch, std::int64_t seq_len,
                             std::int64_t channels, std::int64_t heads) override;

 private:
  // Row-major C[M, N] = op(A) op(B) + beta C in fp32 (see matmul_half for op()); beta is 0
  // (overwrite) or 1 (accumulate).
  void gemm(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n, std::int64_t k,
            const float* a, const float* b, float* c, float beta);
  // Up to three GEMM operands in the GEMMs' format (half_gemms_): one kept in it as it is, an
  // fp32 one rounded to it once, side by side in scratch at 16-byte boundaries (tensor cores want
  // aligned operands); one of 0 elements is skipped. A layer's backward rounds dy once for its dw
  // and dx products. With `reserve_first`, an fp32 first operand only gets its place (its caller
  // rounds it there).
  std::array<const std::uint16_t*, 3> half_copies(const std::array<TensorIn, 3>& operands,
                                                  bool reserve_first = false);
  // True when a product with these tensors runs on 16-bit tensor cores here: GEMMs run in a
  // 16-bit format and every 16-bit tensor is in it (fp32 ones are rounded, the others taken as
  // they are).
  bool half_product(std::initializer_list<TensorIn> tensors) const;
  // A 16-bit layer's forward: y = x w (Conv1D's w [in, out]) or x w^T (Linear's, [out, in]) on
  // the tensor cores, plus the bias row (empty: none), written to y in its dtype (fp32, or 16-bit
  // rounded once from the fp32 sum as the bias is added).
  void half_forward(bool conv1d, TensorIn x, TensorIn w, TensorIn b, TensorOut y, std::int64_t rows,
                    std::int64_t in, std::int64_t out);
  // A 16-bit layer's backward: dw += (x^T dy, Conv1D's [in, out], or dy^T x, Linear's [out, in]),
  // db += dy's column sums (db may be empty), dx = dy w^T or dy w (may be empty); dy rounded once.
  void half_backward(bool conv1d, TensorIn x, TensorIn w, TensorIn dy, std::span<float> dw,
                     std::span<float> db, std::span<float> dx, std::int64_t rows, std::int64_t in,
                     std::int64_t out);
  // Column-major, cuBLAS's own convention: for each of `batch` heads i, C_i [m, n] =
  // alpha op(A_i) op(B_i) (beta 0), the heads `stride_*` floats apart; lda/ldb/ldc as cuBLAS's.
  void gemm_heads(bool transpose_a, bool transpose_b, std::int64_t m, std::int64_t n,
                  std::int64_t k, float alpha, const float* a, std::int64_t lda,
                  std::int64_t stride_a, const float* b, std::int64_t ldb, std::int64_t stride_b,
                  float* c, std::int64_t ldc, std::int64_t stride_c, std::int64_t batch);
  // Refuses, in one line, the shapes the tiled attention kernels cannot launch.
  void check_tiled_attention(std::int64_t batch, std::int64_t seq_len, std::int64_t heads,
                             std::int64_t head_dim) const;
  // At least `bytes` of device scratch, grown (never shrunk) on demand; booked as internal.
  void* scratch(std::size_t bytes);
  // The same, apart, for the column sums' chunk partials (a layer's backward sums its bias
  // gradient while its bf16 operands still sit in scratch()) and the norm's tree-sum passes.
  void* sums_scratch(std::size_t bytes);
  // `buffer` of `buffer_bytes`, grown to at least `bytes` (after the stream is done with it).
  void* grown(void*& buffer, std::size_t& buffer_bytes, std::size_t bytes);
  // db += the column sums of dy [rows, cols] (cuda::add_column_sums, through sums_scratch), and
  // dy rounded to `rounded_dtype` (bf16 or fp16) into `rounded` where it is not null (the
  // products' copy, one read).
  void column_sums(const float* dy, float* db, std::int64_t rows, std::int64_t cols,
                   void* rounded = nullptr, DType rounded_dtype = DType::BF16);
  // The column sums' zeroed counters for `cols` columns (at most kColumnCounters groups).
  unsigned* column_counters(std::int64_t cols) const;
  // One tensor through adamw_update_cuda: the gradients (fp32, bf16 or fp16, as they are) read
  // as `read` says, the 16-bit copy in read.half written when `copy` is not null (16-bit
  // gradients and a copy in one format); the sizes checked.
  void adamw_one(std::span<float> master, TensorIn grads, AdamWGradRead read,
                 std::span<float> exp_avg, std::span<float> exp_avg_sq, const AdamWScalars& scalars,
                 std::uint16_t* copy);
  // LayerNorm backward's dweight and dbias chunk partials, 2 * column_sum_chunks(rows) * channels
  // doubles of sums_scratch, once the rows fit one launch.
  double* layernorm_partials(std::int64_t rows, std::int64_t channels);
  // ---- the checks kernels make on the device (cuda_device_checks.cpp): a label or token out of
  // range is flagged in a slot of check_flags_, read at the next host wait, so no kernel makes
  // the host wait to see it ----

  // What one validating kernel read: ids it requires in [0, limit).
  struct PendingCheck {
    std::string_view kernel;            // "cross_entropy", "embedding_forward", ...
    const std::int64_t* ids = nullptr;  // the labels or tokens it read (device memory)
    std::int64_t seq_len = 0;           // tokens: T, to name the row and position; labels: 0
    std::int64_t limit = 0;             // the classes, or the vocabulary
  };
  // The slot (one word, reset to all ones) where the kernel about to run for `check` records the
  // first bad index it meets; every slot taken: after a host wait that reads them.
  unsigned long long* check_slot(const PendingCheck& check);
  // Right after the stream is done: throws zl::Error naming the first pending check, in launch
  // order, that found a bad index (the message the CPU gives); resets every slot either way.
  void report_checks();
  // Sets up check_flags_ and its host copy; frees them (no throw).
  void create_checks();
  void destroy_checks();

  // ---- uploads (cuda_device_memory.cpp): copy_from_host copies `host` into a pinned staging
  // slot and queues the upload from there, so the host waits only when the slot's previous
  // upload is still queued; an upload over kStagingMaxBytes (parameters at the start, a
  // checkpoint) waits for itself instead of keeping that much pinned memory ----

  // A pinned host buffer and the event after the last upload queued from it.
  struct StagingSlot {
    void* host = nullptr;
    std::size_t bytes = 0;
    cudaEvent_t done = nullptr;  // created with the slot; recorded after each upload
  };
  // Queues the upload of `bytes` (<= kStagingMaxBytes) bytes of `host` to `device` through the
  // next staging slot, after waiting for that slot's previous upload if it is still queued.
  void upload_staged(void* device, const void* host, std::size_t bytes);
  // Frees the staging slots (no throw).
  void destroy_staging();
  // Queues the cross-entropy kernel (its label check pending): each row's loss, in scratch.
  double* cross_entropy_rows(std::span<const float> logits, std::span<const std::int64_t> labels,
                             std::span<float> dlogits, std::int64_t rows, std::int64_t classes,
                             std::int64_t padded_classes, std::int64_t mean_rows);
  // The host waits for the compute stream, after the host wait guard (set_host_wait_guard).
  void wait_on_host();
  // Makes this device's GPU current on the calling thread.
  void select() const;
  // The driver's used bytes on this GPU (cudaMemGetInfo).
  static std::int64_t driver_used_bytes();
  // Gives every cached block back to the driver and destroys its events, reporting nothing.
  void free_cache_unchecked();

  // A freed block and the events that mark the side streams' work queued before its free.
  struct CachedBlock {
    void* ptr = nullptr;
    std::vector<cudaEvent_t> side_work;
  };

  int device_index_ = 0;
  AttentionKind attention_ = AttentionKind::Default;  // set_attention
  cudaStream_t stream_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  void* cublas_workspace_ = nullptr;
  std::size_t cublas_workspace_bytes_ = 0;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
  void* sums_scratch_ = nullptr;  // column sums' chunk partials (sums_scratch)
  std::size_t sums_scratch_bytes_ = 0;
  static constexpr std::int64_t kColumnCounters = 4096;  // column groups of one column sum
  static constexpr std::size_t kColumnCounterBytes = kColumnCounters * sizeof(unsigned);
  unsigned* column_counters_ = nullptr;             // zeroed; each column sum leaves them zeroed
  static constexpr std::size_t kCheckSlots = 64;    // checks pending between two host waits
  unsigned long long* check_flags_ = nullptr;       // kCheckSlots words of device memory
  unsigned long long* check_flags_host_ = nullptr;  // their pinned host copy
  std::vector<PendingCheck> pending_checks_;        // in launch order, one slot each
  static constexpr std::size_t kStagingSlots = 8;   // uploads queued before one waits
  static constexpr std::size_t kStagingMaxBytes = std::size_t{4} << 20;
  std::array<StagingSlot, kStagingSlots> staging_{};  // upload_staged's slots, used in turn
  std::size_t next_staging_ = 0;                      // the slot of the next upload
  std::int64_t live_allocations_ = 0;              // buffers handed out by allocate, not yet freed
  std::multimap<std::size_t, CachedBlock> cache_;  // deallocated blocks by size, for allocate
  std::vector<cudaStream_t> side_streams_;         // add_side_stream
  std::int64_t baseline_used_bytes_ = 0;  // driver's used bytes once this device was set up
  DType half_gemms_ = DType::F32;         // set_half_gemms
  std::function<void()> host_wait_guard_;  // set_host_wait_guard
};

}  // namespace zl
